"""Starting, finding and stopping the local apiserver process of a data dir.

    <data_dir>/apiserver/apiserver.json   where it listens and what it stores in (written by `up`)
    <data_dir>/apiserver/pid              its pid while it runs (its own process group)
    <data_dir>/apiserver/apiserver.log    its stdout and stderr
    <data_dir>/apiserver/pki/, tokens.csv its credentials (apiserver.pki)

The process is `raftkube apiserver ...`, started as store members are (machinery.process.launch:
`spawn`, `stop_process`), so that `raftkube down` finds it by its pid file.
"""

from __future__ import annotations

import http.client
import json
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from apiserver.endpoint import RECORD_FILE, Endpoint, RecordError, read_record
from apiserver.pki import ApiserverPKI, kubeconfig_data
from machinery.process import disk
from machinery.process.launch import LauncherError, port_free, read_pid, spawn, stop_process

PID_FILE = "pid"
LOG_FILE = "apiserver.log"
KUBECONFIG = "kubeconfig"
CONTEXT = "raftkube"


class LocalApiserver:
    """The apiserver process of one data dir."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.pki = ApiserverPKI.of(self.data_dir)
        self.root = self.pki.root

    # ------------------------------------------------------------------ layout
    def recorded(self) -> Endpoint | None:
        """The endpoint `up` recorded, or None when it never ran here."""
        try:
            return read_record(self.root / RECORD_FILE)
        except RecordError as e:
            raise LauncherError(str(e)) from e

    def record(self, endpoint: Endpoint) -> None:
        disk.make_dirs(self.root)
        doc = {"host": endpoint.host, "port": endpoint.port, "storage": endpoint.storage}
        disk.write_private(self.root / RECORD_FILE, (json.dumps(doc, indent=2) + "\n").encode())

    @property
    def log_file(self) -> Path:
        return self.root / LOG_FILE

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / KUBECONFIG

    # ------------------------------------------------------------------ process
    def pid(self) -> int | None:
        return read_pid(self.root / PID_FILE)

    def start(self, endpoint: Endpoint, insecure_store: bool = False, extra_args: tuple[str, ...] = ()) -> int:
        """Start `raftkube apiserver` for `endpoint` (creating the credentials first); `extra_args`
        go to it as they are (`--authorization-mode AlwaysAllow`, say)."""
        if (pid := self.pid()) is not None:
            raise LauncherError(f"the apiserver is already running (pid {pid})")
        if not port_free(endpoint.host, endpoint.port):
            raise LauncherError(f"apiserver: port {endpoint.port} on {endpoint.host} is in use")
        self.pki.ensure(endpoint.host)
        self.record(endpoint)
        argv = [sys.executable, "-m", "components.cli", "apiserver", "--data-dir", str(self.data_dir)]
        argv += ["--host", endpoint.host, "--port", str(endpoint.port)]
        if endpoint.storage:
            argv += ["--storage", endpoint.storage]
        if insecure_store:
            argv.append("--insecure-store")
        argv += list(extra_args)
        return spawn(argv, self.log_file, self.root / PID_FILE)

    def stop(self, timeout: float = 10.0) -> bool:
        """SIGTERM (SIGKILL after `timeout`); True if it was running."""
        return stop_process(self.root / PID_FILE, timeout)

    # ------------------------------------------------------------------ health
    def admin_tls(self) -> ssl.SSLContext:
        """A client context with the admin certificate, verifying the serving certificate."""
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        ctx.load_cert_chain(self.pki.admin.cert, self.pki.admin.key)
        return ctx

    def probe(self, endpoint: Endpoint, path: str = "/readyz", timeout: float = 2.0) -> tuple[int, str]:
        """GET `path` as admin: (status, body); (0, reason) when it cannot be reached."""
        conn = http.client.HTTPSConnection(endpoint.dial_host, endpoint.port, timeout=timeout, context=self.admin_tls())
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read(4096).decode("utf-8", "replace").strip()
        except (OSError, http.client.HTTPException) as e:
            return 0, str(e) or type(e).__name__
        finally:
            conn.close()

    def get_json(self, endpoint: Endpoint, path: str, timeout: float = 2.0, limit: int = 64 << 20) -> Any:
        """GET `path` as admin, decoded; None when it cannot be reached, fails or is too big."""
        conn = http.client.HTTPSConnection(endpoint.dial_host, endpoint.port, timeout=timeout, context=self.admin_tls())
        try:
            conn.request("GET", path, headers={"Accept": "application/json"})
            response = conn.getresponse()
            body = response.read(limit + 1)
            if response.status != 200 or len(body) > limit:
                return None
            return json.loads(body)
        except (OSError, http.client.HTTPException, ValueError):
            return None
        finally:
            conn.close()

    def wait_ready(self, endpoint: Endpoint, timeout: float) -> None:
        """Poll /readyz until it answers 200; LauncherError when the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        last = (0, "not tried")
        while time.monotonic() < deadline:
            if self.pid() is None:
                raise LauncherError(f"the apiserver exited during startup; see {self.log_file}")
            last = self.probe(endpoint, timeout=min(2.0, max(0.1, deadline - time.monotonic())))
            if last[0] == 200:
                return
            time.sleep(0.1)
        raise LauncherError(
            f"the apiserver was not ready within {timeout:.0f}s (last /readyz: {last[0] or 'no answer'} {last[1]});"
            f" see {self.log_file}"
        )

    # ------------------------------------------------------------------ kubeconfig
    def write_kubeconfig(self, endpoint: Endpoint) -> Path:
        """`<data_dir>/kubeconfig` (0600) for the admin: certificate by default, token as `raftkube-token`."""
        doc = kubeconfig(endpoint.url, self.pki)
        disk.write_private(self.kubeconfig, yaml.safe_dump(doc, sort_keys=False).encode())
        return self.kubeconfig


def kubeconfig(server: str, creds: ApiserverPKI) -> dict[str, Any]:
    """A kubeconfig for `server` with the credentials inline (it keeps working if copied away)."""
    data = kubeconfig_data
    users: list[dict[str, Any]] = [
        {
            "name": "admin",
            "user": {"client-certificate-data": data(creds.admin.cert), "client-key-data": data(creds.admin.key)},
        }
    ]
    contexts: list[dict[str, Any]] = [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "admin"}}]
    token = creds.admin_token()
    if token is not None:
        users.append({"name": "admin-token", "user": {"token": token}})
        contexts.append({"name": f"{CONTEXT}-token", "context": {"cluster": CONTEXT, "user": "admin-token"}})
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server, "certificate-authority-data": data(creds.ca)}}],
        "users": users,
        "contexts": contexts,
        "current-context": CONTEXT,
        "preferences": {},
    }


__all__ = ["KUBECONFIG", "Endpoint", "LocalApiserver", "kubeconfig"]
