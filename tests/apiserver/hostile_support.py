"""Watching a real apiserver process while hostile requests hit it: its resident memory (peak,
sampled from /proc/<pid>/status), whether /readyz keeps answering, and a client for an ordinary
user with no RBAC bindings (a `raftkube user add` certificate).

The memory watch also guards the machine: past `kill_above` it SIGKILLs the apiserver (a process
the test's fixture started, found by its pid file), so that a regression fails the test instead
of exhausting the host.
"""

from __future__ import annotations

import base64
import os
import signal
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from apiserver.launcher import LocalApiserver
from tests.apiserver.support import ApiserverUnderTest
from tests.support.cli import raftkube

MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    """VmRSS of `pid` in bytes (0 once the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return 0


def apiserver_pid(server: ApiserverUnderTest) -> int:
    pid = LocalApiserver(server.data_dir).pid()
    assert pid is not None, f"no apiserver pid in {server.data_dir}"
    return pid


@dataclass
class Watch:
    """What the watch saw: the RSS before and at its peak, /readyz failures, and whether the
    apiserver had to be killed."""

    pid: int
    before: int = 0
    peak: int = 0
    killed: bool = False
    readyz_failures: list[str] = field(default_factory=list)
    readyz_probes: int = 0

    def describe(self) -> str:
        return (
            f"apiserver RSS {self.before / MIB:.0f} MiB before, peak {self.peak / MIB:.0f} MiB"
            f"{' (KILLED at the ceiling)' if self.killed else ''}; /readyz {self.readyz_probes} probes, "
            f"{len(self.readyz_failures)} failed"
        )


@contextmanager
def watched(
    server: ApiserverUnderTest, *, kill_above: int = 3 * 1024 * MIB, readyz_timeout: float = 10.0
) -> Iterator[Watch]:
    """Sample the apiserver's RSS every 10 ms and probe /readyz every 250 ms while the block runs."""
    watch = Watch(apiserver_pid(server))
    watch.before = watch.peak = rss_bytes(watch.pid)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            rss = rss_bytes(watch.pid)
            watch.peak = max(watch.peak, rss)
            if rss > kill_above and not watch.killed:
                watch.killed = True
                os.kill(watch.pid, signal.SIGKILL)
            stop.wait(0.01)

    def probe() -> None:
        with server.http(timeout=readyz_timeout) as client:
            while not stop.is_set():
                watch.readyz_probes += 1
                try:
                    r = client.get("/readyz")
                    if r.status_code != 200:
                        watch.readyz_failures.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as e:
                    watch.readyz_failures.append(f"{type(e).__name__}: {e}")
                stop.wait(0.25)

    threads = [threading.Thread(target=sample, daemon=True), threading.Thread(target=probe, daemon=True)]
    for t in threads:
        t.start()
    try:
        yield watch
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=readyz_timeout + 5)
        print(watch.describe())


def user_client(server: ApiserverUnderTest, name: str, tmp: Path, timeout: float = 60.0) -> httpx.Client:
    """An HTTPS client authenticated as `name` by a `raftkube user add` certificate: an ordinary
    user with no RBAC bindings (every authenticated user may still create review objects)."""
    out = tmp / f"{name}.kubeconfig"
    made = raftkube("user", "add", name, "--data-dir", str(server.data_dir), "--out", str(out))
    assert made.returncode == 0, made.stderr
    user = yaml.safe_load(out.read_text())["users"][0]["user"]
    cert, key = tmp / f"{name}.crt", tmp / f"{name}.key"
    cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
    key.write_bytes(base64.b64decode(user["client-key-data"]))
    key.chmod(0o600)
    context = ssl.create_default_context(cafile=str(server.ca))
    context.load_cert_chain(str(cert), str(key))
    return httpx.Client(base_url=server.url, verify=context, timeout=timeout)


def readyz_ok(server: ApiserverUnderTest) -> bool:
    with server.http(timeout=10) as client:
        r = client.get("/readyz")
        return r.status_code == 200


def settle(seconds: float = 0.2) -> None:
    time.sleep(seconds)
