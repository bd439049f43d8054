"""Processes the benchmark starts: a registry that kills them all by pid, and /proc readings.

Everything is started through `spawn()` (or registered with `track()`), so that `kill_all()`
in the driver's `finally` (and on SIGTERM/SIGINT) leaves nothing running behind.  Each child
gets its own session, so that a signal aimed at it never reaches the driver.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

_tracked: dict[int, subprocess.Popen[Any] | None] = {}


def spawn(
    argv: list[str],
    log: Path | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session; stdout/stderr go to `log` unless `stdout` is given."""
    out: Any = stdout
    logf = open(log, "ab") if log is not None else None  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=out if out is not None else (logf or subprocess.DEVNULL),
            stderr=logf or subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )
    finally:
        if logf is not None:
            logf.close()
    _tracked[proc.pid] = proc
    return proc


def track(pid: int) -> None:
    """Remember a process started elsewhere (the raftkube launcher) so that kill_all ends it."""
    _tracked.setdefault(pid, None)


def alive(pid: int) -> bool:
    proc = _tracked.get(pid)
    if proc is not None:
        return proc.poll() is None
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill(pid: int, sig: int = signal.SIGKILL, wait: float = 5.0) -> None:
    """Signal one process by pid and wait (bounded) until it is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
    deadline = time.monotonic() + wait
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.005)
    proc = _tracked.pop(pid, None)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.1)


def kill_all() -> None:
    """SIGKILL every process this benchmark started that is still running."""
    for pid in list(_tracked):
        if alive(pid):
            kill(pid, signal.SIGKILL, wait=2.0)
        _tracked.pop(pid, None)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat; 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid: int) -> int:
    """Resident set size from /proc/<pid>/statm; 0 if it is gone."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (FileNotFoundError, ProcessLookupError):
        return 0


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return 0


def vm_rss_bytes(pid: int) -> int:
    """VmRSS from /proc/<pid>/status (what `ps` and `top` show as RSS); 0 if it is gone."""
    return _status_kib(pid, "VmRSS:")


def peak_rss_bytes(pid: int) -> int:
    """VmHWM: the most resident memory the process ever had (0 when it is gone)."""
    return _status_kib(pid, "VmHWM:")


def tcp_send_queues(local_port: int) -> dict[int, int]:
    """Remote port -> bytes in the kernel send queue, for every established connection on this
    host whose local port is `local_port` (tx_queue in /proc/net/tcp and tcp6: sent or queued,
    not yet acknowledged by the other end)."""
    out: dict[int, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 5:
                continue
            lport = int(f[1].rsplit(":", 1)[1], 16)
            if lport == local_port and f[3] == "01":  # TCP_ESTABLISHED
                out[int(f[2].rsplit(":", 1)[1], 16)] = int(f[4].split(":")[0], 16)
    return out
