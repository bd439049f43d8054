"""Starting, finding and stopping the local apiserver processes of a data dir.

    <data_dir>/apiserver/apiserver.json   the cluster's API address and what it stores in (written by `up`)
    <data_dir>/apiserver/pid              the apiserver's pid while it runs (its own process group)
    <data_dir>/apiserver/apiserver.log    its stdout and stderr
    <data_dir>/apiserver/args.json        the flags it was last started with (restarts start it so)
    <data_dir>/apiserver/pki/, tokens.csv the credentials of every apiserver (apiserver.pki)
    <data_dir>/apiserver-<n>/             an apiserver of an HA set (components.cli.apiserver_set):
                                          its own apiserver.json (where it listens), pid, log, args

An HA set's apiservers share the credentials in <data_dir>/apiserver/, whose apiserver.json
then names the balancer in front of them: what every kubeconfig names.

The process is `raftkube apiserver ...`, started as store members are (machinery.process.launch:
`spawn`, `stop_process`), so that `raftkube down` finds it by its pid file.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from apiserver.endpoint import RECORD_FILE, Endpoint, RecordError, read_record
from apiserver.kubernetes_service import DEFAULT_SERVICE_CIDR, first_address
from apiserver.pki import ApiserverPKI, cluster_entry, kubeconfig_data
from machinery.process import disk
from machinery.process.launch import LauncherError, port_free, read_pid, spawn, stop_process

PID_FILE = "pid"
LOG_FILE = "apiserver.log"
ARGS_FILE = "args.json"
FRONT = "apiserver"
MEMBER = re.compile(r"^apiserver-(?P<n>[1-9])$")
"""An apiserver of an HA set (`[apiserver] count` > 1)."""
KUBECONFIG = "kubeconfig"
CONTEXT = "raftkube"


class LocalApiserver:
    """One apiserver process of a data dir: `apiserver` (the one, or the HA set's front record
    without a process) or `apiserver-<n>` (a member of an HA set)."""

    def __init__(self, data_dir: Path, name: str = FRONT) -> None:
        if name != FRONT and not MEMBER.match(name):
            raise ValueError(f"no apiserver {name!r} (apiserver, or apiserver-1 .. apiserver-9 of an HA set)")
        self.data_dir = Path(data_dir)
        self.name = name
        self.pki = ApiserverPKI.of(self.data_dir)
        self.root = self.pki.root if name == FRONT else self.data_dir / name

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

    def start(
        self,
        endpoint: Endpoint,
        insecure_store: bool = False,
        extra_args: tuple[str, ...] = (),
        *,
        in_host: tuple[str, ...] = (),
        names: tuple[str, ...] = (),
    ) -> int:
        """Start `raftkube apiserver` for `endpoint` (creating the credentials first); `extra_args`
        go to it as they are (`--authorization-mode AlwaysAllow`, say).  `in_host`: the command
        that runs it on a host of its own (`ip netns exec NS`; the host exists already), whose
        ports are its own; `names`: more addresses the shared serving certificate must name (an
        HA set's others, so that no apiserver's start reissues it without them)."""
        if (pid := self.pid()) is not None:
            raise LauncherError(f"the {self.name} is already running (pid {pid})")
        if not in_host and not port_free(endpoint.host, endpoint.port):
            raise LauncherError(f"{self.name}: port {endpoint.port} on {endpoint.host} is in use")
        self.pki.ensure(endpoint.host, (*names, service_ip_of(extra_args)))
        self.record(endpoint)
        argv = [sys.executable, "-m", "components.cli", "apiserver", "--data-dir", str(self.data_dir)]
        argv += ["--host", endpoint.host, "--port", str(endpoint.port)]
        if endpoint.storage:
            argv += ["--storage", endpoint.storage]
        if insecure_store:
            argv.append("--insecure-store")
        argv += list(extra_args)
        saved = {"insecure_store": insecure_store, "args": list(extra_args), "in_host": in_host, "names": names}
        disk.write_private(self.root / ARGS_FILE, (json.dumps(saved) + "\n").encode())
        return spawn([*in_host, *argv], self.log_file, self.root / PID_FILE)

    def start_as_before(self) -> int:
        """Start it at its recorded endpoint with the flags of its last start (a supervisor's
        restart, `raftkube start`)."""
        endpoint = self.recorded()
        if endpoint is None:
            raise LauncherError(f"no {self.name} recorded in {self.data_dir}")
        try:
            saved = json.loads((self.root / ARGS_FILE).read_text())
            insecure, args = bool(saved["insecure_store"]), tuple(str(a) for a in saved["args"])
            in_host = tuple(str(a) for a in saved.get("in_host", ()))
            names = tuple(str(a) for a in saved.get("names", ()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise LauncherError(f"{self.root / ARGS_FILE}: missing or damaged; `raftkube up` starts it") from None
        return self.start(endpoint, insecure_store=insecure, extra_args=args, in_host=in_host, names=names)

    @property
    def pid_file(self) -> Path:
        return self.root / PID_FILE

    def stop(self, timeout: float = 10.0) -> bool:
        """SIGTERM (SIGKILL after `timeout`); True if it was running."""
        return stop_process(self.pid_file, timeout)

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

    def wait_ready(self, endpoint: Endpoint, timeout: float, since: float | None = None) -> None:
        """Poll /readyz until it answers 200; LauncherError when the process dies or time runs out.
        `since`: the monotonic time the `timeout` counts from (when the apiserver was started,
        if the caller did other waiting since); default now."""
        deadline = (time.monotonic() if since is None else since) + timeout
        last = (0, "not tried")
        while time.monotonic() < deadline:
            if self.pid() is None:
                raise LauncherError(f"the {self.name} exited during startup; see {self.log_file}")
            last = self.probe(endpoint, timeout=min(2.0, max(0.1, deadline - time.monotonic())))
            if last[0] == 200:
                return
            time.sleep(0.1)
        raise LauncherError(
            f"the {self.name} was not ready within {timeout:.0f}s (last /readyz: {last[0] or 'no answer'} {last[1]});"
            f" see {self.log_file}"
        )

    # ------------------------------------------------------------------ kubeconfig
    def write_kubeconfig(self, endpoint: Endpoint, servers: tuple[str, ...] = ()) -> Path:
        """`<data_dir>/kubeconfig` (0600) for the admin: certificate by default, token as
        `raftkube-token`; `servers`: an HA set's apiservers (the kubeconfig's extension)."""
        doc = kubeconfig(endpoint.url, self.pki, servers)
        disk.write_private(self.kubeconfig, yaml.safe_dump(doc, sort_keys=False).encode())
        return self.kubeconfig


def kubeconfig(server: str, creds: ApiserverPKI, servers: tuple[str, ...] = ()) -> dict[str, Any]:
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
        "clusters": [{"name": CONTEXT, "cluster": cluster_entry(server, creds.ca, servers)}],
        "users": users,
        "contexts": contexts,
        "current-context": CONTEXT,
        "preferences": {},
    }


__all__ = ["KUBECONFIG", "Endpoint", "LocalApiserver", "kubeconfig"]


def service_ip_of(args: tuple[str, ...]) -> str:
    """The `kubernetes` Service's ClusterIP an apiserver started with `args` gives itself (the
    first address of its --service-cluster-ip-range): its serving certificate must name it
    before it starts, with the HA set's addresses (`start`'s `names`) in the same issue."""
    cidr = DEFAULT_SERVICE_CIDR
    for i, arg in enumerate(args[:-1]):
        if arg == "--service-cluster-ip-range":
            cidr = args[i + 1]
    try:
        return first_address(cidr)
    except ValueError:
        return first_address(DEFAULT_SERVICE_CIDR)  # the apiserver itself refuses the flag, naming it
