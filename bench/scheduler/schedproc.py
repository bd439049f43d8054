"""The scheduler under test: `python -m components.scheduler` as a process of its own.

It runs with its own kubeconfig (client certificate of system:kube-scheduler, as `raftkube up`
writes it), without leader election (one copy; the Lease would only add its start-up wait),
and with /metrics on a free loopback port.  Its log line "informers synced" is where the
measured window starts: from then on its cache holds every node and every pending pod.
"""

from __future__ import annotations

import asyncio
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path

from apiserver.pki import component_kubeconfig
from bench.scheduler.histogram import Sample, parse
from bench.store import procs
from machinery.process.launch import free_ports

ROOT = Path(__file__).resolve().parents[2]
SYNCED = "informers synced"


class SchedulerError(Exception):
    """The scheduler exited, or did not sync in time."""


def kubeconfig(apiserver_data_dir: Path, server: str) -> Path:
    """The scheduler's kubeconfig in the apiserver's data dir (written now, as `raftkube up` does)."""
    return component_kubeconfig(apiserver_data_dir, "scheduler", server=server)


def _log_time(line: str) -> float:
    """time.time() of a log line "2026-12-02 02:48:34,500 INFO ..." (logging's asctime, local time)."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


class SchedulerProcess:
    def __init__(self, kubeconfig: Path, log: Path) -> None:
        self.log = log
        (self.port,) = free_ports(1)
        argv = [sys.executable, "-m", "components.scheduler", "--kubeconfig", str(kubeconfig)]
        argv += ["--no-leader-elect", "--health-port", str(self.port)]
        self.started_at = time.time()
        self.proc = procs.spawn(argv, log=log, cwd=ROOT)
        self.pid = self.proc.pid

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-1500:]
        except OSError:
            return ""

    async def synced(self, timeout: float) -> float:
        """time.time() at which the scheduler logged that its informers are synced."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                text = self.log.read_text(errors="replace")
            except OSError:
                text = ""
            for line in text.splitlines():
                if SYNCED in line:
                    return _log_time(line)
            if self.proc.poll() is not None:
                raise SchedulerError(f"the scheduler exited ({self.proc.returncode}): {self._tail()}")
            await asyncio.sleep(0.01)
        raise SchedulerError(f"the scheduler did not sync within {timeout:.0f}s: {self._tail()}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        return procs.cpu_seconds(self.pid)

    def run_delay_seconds(self) -> float:
        """Time its main thread (the event loop, where scheduling happens) spent runnable but
        waiting for a core, from /proc/<pid>/schedstat: on a busy machine, the CPU it wanted
        and did not get (0 when it is gone)."""
        try:
            return int(Path(f"/proc/{self.pid}/schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return 0.0

    def rss_bytes(self) -> int:
        return procs.vm_rss_bytes(self.pid)

    def peak_rss_bytes(self) -> int:
        return procs.peak_rss_bytes(self.pid)

    async def metrics(self) -> list[Sample]:
        """Its /metrics page, parsed."""

        def get() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
                body: bytes = r.read()
            return body.decode()

        return parse(await asyncio.to_thread(get))

    def stop(self) -> None:
        procs.kill(self.pid)
