"""Local processes by pid file: spawning one in its own process group, finding it again,
stopping it, and the free ports it will bind.

Every process `raftkube` starts for a local cluster (store members, the apiserver, the
components and kubelets) goes through here, whichever layer owns it: the store's launcher,
the apiserver's and the CLI's.  Each has a pid file; next to it `pid.stopped` says it was
stopped on purpose (`stop_process`, `mark_stopped`: `down`, `restart`, `store kill`) and
stays until it is started again, so that a supervisor brings back what died on its own and
leaves alone what a user stopped.  `pid.lock` serialises starting and stopping one part
across processes.  Each child runs in its own process group, so signals aimed at one part
(kill, pause) never reach the launcher or the other parts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from machinery.process import disk

_children: dict[int, subprocess.Popen[bytes]] = {}
"""Processes started by this process: kept so that they are reaped (no zombies, no warnings)."""
_exit_codes: dict[int, int] = {}
"""How reaped children ended (negative: killed by that signal), for tests."""


class LauncherError(Exception):
    """A local process or cluster cannot be started, found or stopped; the message says why."""


HANDED_OUT_KEPT = 4096
"""Ports `free_ports` remembers having handed out (the most recent ones)."""
_handed_out: dict[int, None] = {}  # insertion-ordered: the oldest is dropped first


LISTEN_PORT_FLOOR = 10000
"""The lowest port `free_ports` picks: above the well-known and most registered services."""
_random = random.Random()


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands to outgoing connections (ip_local_port_range)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bind_any(host: str) -> socket.socket:
    """A socket bound to a free port below the kernel's ephemeral range when one is found:
    a port from that range (what binding port 0 gives) can be taken by any outgoing
    connection in the second between `free_ports` releasing it and its user binding it
    (clean run 34: a store member's 'address already in use' under load); below the range
    only another listener picking the same port at random can."""
    top = _ephemeral_floor()
    for _ in range(100 if top > LISTEN_PORT_FLOOR + 1000 else 0):
        s = socket.socket()
        try:
            s.bind((host, _random.randrange(LISTEN_PORT_FLOOR, top)))
            return s
        except OSError:
            s.close()
    s = socket.socket()
    s.bind((host, 0))
    return s


def free_ports(n: int, host: str = "127.0.0.1", bind_any: Callable[[str], socket.socket] = _bind_any) -> list[int]:
    """`n` distinct ports that were free a moment ago, none of them handed out before by this
    process.  A port is only reserved once its user binds it, and `up` starts a process per
    port it picks (members, the apiserver, components) that binds a second or so later: the
    kernel may hand a port that was released but not yet bound to the next caller, and two
    parts of one cluster then fight over it.  `bind_any(host)` -> a socket bound to a port."""
    socks = []
    ports: list[int] = []
    try:
        for _ in range(50 * n):
            if len(ports) == n:
                break
            s = bind_any(host)
            socks.append(s)  # kept bound until the end, so that this call never sees it twice
            port = s.getsockname()[1]
            if port not in _handed_out:
                ports.append(port)
        if len(ports) < n:
            raise LauncherError(f"no {n} free ports on {host} that this process has not handed out already")
    finally:
        for s in socks:
            s.close()
    for port in ports:
        _handed_out[port] = None
    while len(_handed_out) > HANDED_OUT_KEPT:
        del _handed_out[next(iter(_handed_out))]
    return ports


def outward_address() -> str | None:
    """This host's address on its default route (what another network namespace on this host
    reaches it at), or None without one.  A UDP socket's connect sends nothing: it only asks the
    kernel which source address the route to a far address would use."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.254", 9))
            address: str = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def read_pid(pid_file: Path) -> int | None:
    """The pid in `pid_file` if that process is alive (a stale pid file is ignored)."""
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    # A zombie (exited, not yet reaped) is not alive.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        # it ended (and was reaped) between the signal and the read: ESRCH from the read, or no
        # such file; only a host without /proc leaves the signal's answer standing
        return None if os.path.isdir("/proc/self") else pid
    return None if stat.rsplit(")", 1)[1].split()[0] == "Z" else pid


def stopped_file(pid_file: Path) -> Path:
    """Present while the part was stopped on purpose (and not started since)."""
    return pid_file.with_name(pid_file.name + ".stopped")


def stopped_on_purpose(pid_file: Path) -> bool:
    return stopped_file(pid_file).exists()


def mark_stopped(pid_file: Path) -> None:
    disk.write_private(stopped_file(pid_file), f"{time.time():.3f} by pid {os.getpid()}\n".encode())


_held: dict[str, tuple[int, int]] = {}
"""Part locks this process holds: path -> (fd, depth); re-entrant, so that a supervisor that
holds one while it decides can call a start that takes it again."""


@contextlib.contextmanager
def part_lock(pid_file: Path, wait: bool = True) -> Iterator[bool]:
    """Hold `pid.lock` next to `pid_file` (blocking, or False at once when `wait` is False
    and another process holds it): one start or stop of a part at a time."""
    path = os.fspath(pid_file.with_name(pid_file.name + ".lock"))
    if path in _held:
        fd, depth = _held[path]
        _held[path] = (fd, depth + 1)
        try:
            yield True
        finally:
            _held[path] = (fd, _held[path][1] - 1)
        return
    disk.make_dirs(pid_file.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        _held[path] = (fd, 1)
        try:
            yield True
        finally:
            del _held[path]
    finally:
        os.close(fd)  # drops the lock


def spawn(argv: list[str], log_file: Path, pid_file: Path, env: dict[str, str] | None = None) -> int:
    """Start `argv` in its own process group (signals for it never reach us), stdout and
    stderr appended to `log_file`, its pid written to `pid_file`; `env` adds to ours.  A part
    already running under `pid_file` is refused; a mark of a stop on purpose is cleared once
    the new pid is written (a supervisor never sees it dead and unmarked in between)."""
    with part_lock(pid_file):
        running = read_pid(pid_file)
        if running is not None:
            raise LauncherError(f"{pid_file.parent.name} is already running (pid {running})")
        log = disk.open_log(log_file)  # handed to the child process
        try:
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=os.getcwd(),
                env=child_env(env),
            )
        finally:
            os.close(log)
        _children[proc.pid] = proc
        disk.write_private(pid_file, f"{proc.pid}\n".encode())
        with contextlib.suppress(FileNotFoundError):
            stopped_file(pid_file).unlink()
    return proc.pid


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """Our environment, `env` on top, with this checkout first on the import path."""
    return {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": _package_root() + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }


def stop_process(pid_file: Path, timeout: float = 10.0) -> bool:
    """SIGTERM the process group of the pid in `pid_file`, then SIGKILL after `timeout`;
    remove the pid file; True if it was running.  The part is marked stopped on purpose (even
    when it was already down: a supervisor must not bring it back after this)."""
    return stop_processes([pid_file], timeout)[0]


def stop_processes(pid_files: Sequence[Path], timeout: float = 10.0) -> list[bool]:
    """stop_process for several parts at once: each is marked stopped on purpose and sent
    SIGTERM, then all are waited for together, so that stopping them takes the slowest one's
    shutdown and not the sum of all (a local cluster's `down` spent 1.6 s stopping its parts
    one after the other, each 0.1-0.45 s).  True for each that was running."""
    with contextlib.ExitStack() as locks:
        pids: dict[Path, int] = {}
        for pid_file in sorted(set(pid_files)):  # every stop takes the locks in one order
            if not pid_file.parent.is_dir():
                continue
            locks.enter_context(part_lock(pid_file))
            mark_stopped(pid_file)
            pid = read_pid(pid_file)
            if pid is not None:
                pids[pid_file] = pid
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGCONT)  # a paused process cannot handle SIGTERM
                    os.killpg(pid, signal.SIGTERM)
        waiting = _wait_gone(dict(pids), timeout)
        for pid in waiting.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        _wait_gone(waiting, 2.0)  # SIGKILL takes a moment too: reap it, leave no zombie
        for pid_file, pid in pids.items():
            reap(pid)
            with contextlib.suppress(FileNotFoundError):
                pid_file.unlink()
    return [pid_file in pids for pid_file in pid_files]


def _wait_gone(waiting: dict[Path, int], seconds: float) -> dict[Path, int]:
    """Reap the parts (pid file -> pid) as they end, for at most `seconds`; those still running."""
    waiting = dict(waiting)
    deadline = time.monotonic() + seconds
    while waiting:
        for pid_file, pid in list(waiting.items()):
            reap(pid)
            if read_pid(pid_file) is None:
                del waiting[pid_file]
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    return waiting


def exit_code(pid: int) -> int | None:
    """How a process started by this process ended (-9: SIGKILL), once reaped; else None."""
    reap(pid)
    return _exit_codes.get(pid)


def reap(pid: int) -> None:
    """Collect `pid` if it is a child that has exited (no zombies), keeping how it ended."""
    proc = _children.get(pid)
    if proc is not None:
        code = proc.poll()
        if code is not None:
            _exit_codes[pid] = code
            del _children[pid]
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])
