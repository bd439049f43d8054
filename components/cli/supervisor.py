"""Keeping a local cluster's parts running: `raftkube up` restarts any part that exits.

A kube control plane is not expected to stay up by itself: the controller-manager and the
scheduler exit when they lose their leader Lease (so that two never act at once), and a
store member or the apiserver may die under load.  kubeadm's answer is the kubelet, which
restarts static pods with back-off.  Ours is the `raftkube up` process that started the parts:

* **Who supervises.**  In the foreground, `up` itself, between the status table and the
  merged logs.  With `--detach`, `up` starts a second `up` (the same code, its output in
  `<data_dir>/supervisor/supervisor.log`) in its own session, waits until that one says the
  cluster is ready (a pipe), prints the table and returns: the detached `up` is the parent of
  every part, so it learns each exit status, and there is one code path for both modes.  Its
  pid is in `<data_dir>/up.lock`, which it holds (components.cli.up_lock): a second `up` is
  refused, and `raftkube down` asks it to let go (SIGUSR1) and waits for that before it
  stops the parts, so nothing is brought back while `down` stops it.  SIGTERM or Ctrl-C to
  either `up` stops the whole cluster, as before.  Not systemd or cron: a user's cluster in
  a directory, started and stopped by `raftkube`, has no unit to install.
* **What is restarted.**  Every part `up` started (store members, the apiserver, the
  controller-manager, the scheduler, kubelets, hollow nodes), and a store member added later
  once it has been seen running, when its process is gone and it was not stopped on purpose.
  `raftkube down`, `restart`, `stop`, `store kill`, `store member remove` (every stop through
  machinery.process.launch) mark the part stopped on purpose (`pid.stopped` by its pid file) until
  something starts it again (`raftkube start`/`restart PART`, `store start`/`restart`): a
  chaos user's `store kill 2` leaves member 2 down, as it did, while a `kill -9` of its pid,
  an OOM kill or a crash is undone.  A paused part (`store pause`) is alive: left alone.
* **Back-off**, as the kubelet's CrashLoopBackOff but scaled to a laptop cluster whose parts
  start in a second: 1 s before the first restart, doubling to 30 s; a part that then stays
  up 60 s (twice the cap) starts again at 1 s.  A start that fails (a port still held)
  counts as a crash for the back-off.  Polling the pid files every 0.3 s (not SIGCHLD) also
  sees parts this process did not start (`raftkube restart` starts them from another process).
* **What is said.**  Each exit, with its exit code or signal and the last lines of the part's
  log, and each restart, on `up`'s output; counts and the last reason and time in
  `<data_dir>/supervisor/restarts.json` (reset by each `up`), which `raftkube status` shows
  as kubectl shows a pod's RESTARTS.  RESTARTS counts the supervisor's restarts only, not a
  user's `raftkube restart`.
* **When it ends.**  On Ctrl-C/SIGTERM (stopping everything), on `down`'s SIGUSR1 (stopping
  nothing), and by itself once every part has been stopped on purpose or the data dir is
  gone: there is nothing left to keep running.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from machinery.process import disk
from machinery.process.launch import LauncherError, child_env, exit_code, part_lock, read_pid, stopped_on_purpose

BACKOFF_INITIAL_S = 1.0
BACKOFF_MAX_S = 30.0
BACKOFF_RESET_S = 2 * BACKOFF_MAX_S
POLL_S = 0.3
TAIL_LINES = 5
TAIL_BYTES = 4096
SUPERVISOR_DIR = "supervisor"
RESTARTS_FILE = "restarts.json"
LOG_FILE = "supervisor.log"
READY = b"ready\n"


@dataclass(frozen=True)
class Part:
    """One process of the cluster, named as `raftkube restart` names it."""

    name: str
    pid_file: Path
    log_file: Path
    start: Callable[[], int]


@dataclass
class _State:
    pid: int | None = None  # the last pid seen alive
    up_since: float = 0.0
    delay: float = BACKOFF_INITIAL_S
    due: float | None = None  # when a restart is due (it died on its own)
    reason: str = ""
    stopped: bool = False  # seen stopped on purpose (said once)
    restarts: int = 0
    last: dict[str, Any] | None = field(default=None)


def supervisor_dir(data_dir: Path) -> Path:
    return Path(data_dir) / SUPERVISOR_DIR


def read_restarts(data_dir: Path) -> dict[str, dict[str, Any]]:
    """What the supervisor recorded: part -> {"restarts": n, "last": {"reason", "time"} | None}."""
    try:
        with (supervisor_dir(data_dir) / RESTARTS_FILE).open("rb") as f:
            doc = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, dict) and isinstance(v.get("restarts"), int)}


def exit_reason(code: int | None) -> str:
    """How a process ended, as `kubectl describe` would say it."""
    if code is None:
        return "exited (not started by this supervisor: no exit status)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def log_tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of a log (read from its last TAIL_BYTES bytes)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - TAIL_BYTES))
            data = f.read(TAIL_BYTES)
    except OSError:
        return []
    return [ln.decode("utf-8", "replace").rstrip()[:500] for ln in data.splitlines()[-lines:]]


class Supervisor:
    """Restarts the parts `parts()` lists when they die on their own; call `poll` often."""

    def __init__(
        self,
        data_dir: Path,
        parts: Callable[[], list[Part]],
        say: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.parts, self.say, self.clock = parts, say, clock
        self._states: dict[str, _State] = {}
        self._record()  # a new `up`: no restarts yet
        for part in parts():  # what runs now is ours, even if it is stopped before the first poll
            self._states[part.name] = _State(pid=read_pid(part.pid_file), up_since=clock())

    def poll(self) -> None:
        now = self.clock()
        for part in self.parts():
            st = self._states.setdefault(part.name, _State())
            pid = read_pid(part.pid_file)
            if pid is not None:
                if pid != st.pid:
                    st.pid, st.up_since, st.stopped, st.due = pid, now, False, None
                elif now - st.up_since >= BACKOFF_RESET_S:
                    st.delay = BACKOFF_INITIAL_S
                continue
            if stopped_on_purpose(part.pid_file):
                if not st.stopped and (st.pid is not None or st.due is not None):
                    self.say(f"{part.name} was stopped on purpose; not restarting it (`raftkube start {part.name}`)")
                st.stopped, st.due, st.pid = True, None, None
                continue
            if st.pid is None and st.due is None:
                continue  # never seen running: not ours to start
            if st.due is None:
                self._died(part, st, now)
            if now >= (st.due or now):
                self._restart(part, st, now)

    def finished(self) -> bool:
        """Nothing left to keep running: every part was stopped on purpose, or the data dir is gone."""
        if not self.data_dir.is_dir():
            return True
        states = [self._states.get(p.name) for p in self.parts()]
        return bool(states) and all(s is not None and s.stopped for s in states)

    def watch(self, stop: Callable[[], bool], release: Callable[[], bool], check: Callable[[], None]) -> str:
        """`up`'s foreground loop: until a stop signal ("stop"), `down` taking over ("release")
        or nothing left to supervise ("finished"), call `check` (which polls this supervisor and
        whatever the caller shows) every POLL_S.  Both kinds of `up` (ours, and on kube-apiserver)
        end the same way."""
        while not stop():
            if release():
                return "release"
            if self.finished():
                return "finished"
            time.sleep(POLL_S)
            if not (stop() or release()):
                check()
        return "stop"

    def _died(self, part: Part, st: _State, now: float) -> None:
        st.reason = exit_reason(exit_code(st.pid)) if st.pid is not None else st.reason
        st.due = now + st.delay
        self.say(f"{part.name} (pid {st.pid}) {st.reason}; restarting it in {st.delay:.0f}s")
        for line in log_tail(part.log_file):
            self.say(f"  {part.name} log: {line}")
        st.pid = None

    def _restart(self, part: Part, st: _State, now: float) -> None:
        with part_lock(part.pid_file, wait=False) as mine:
            if not mine or read_pid(part.pid_file) is not None or stopped_on_purpose(part.pid_file):
                return  # someone else is starting or stopping it: look again next time
            try:
                pid = part.start()
            except (LauncherError, OSError) as e:
                st.delay = min(2 * st.delay, BACKOFF_MAX_S)
                st.due = now + st.delay
                self.say(f"{part.name} could not be restarted ({e}); trying again in {st.delay:.0f}s")
                return
        st.restarts += 1
        st.last = {"reason": st.reason, "time": _utc_now()}
        st.pid, st.up_since, st.due = pid, now, None
        st.delay = min(2 * st.delay, BACKOFF_MAX_S)
        self.say(f"{part.name} restarted (pid {pid}, restart {st.restarts})")
        self._record()

    def _record(self) -> None:
        doc = {name: {"restarts": s.restarts, "last": s.last} for name, s in self._states.items() if s.restarts}
        with contextlib.suppress(OSError):
            disk.make_dirs(supervisor_dir(self.data_dir))
            disk.write_private(supervisor_dir(self.data_dir) / RESTARTS_FILE, (json.dumps(doc) + "\n").encode())


def _utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(stamp: str, now: float | None = None) -> str:
    """'12s ago', '3m ago', '2h ago' for an RFC 3339 UTC time (as kubectl prints ages)."""
    try:
        then = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()
    except (TypeError, ValueError):
        return "?"
    s = max(0, int((time.time() if now is None else now) - then))
    return f"{s}s ago" if s < 120 else (f"{s // 60}m ago" if s < 7200 else f"{s // 3600}h ago")


# ---------------------------------------------------------------------- --detach
@dataclass(frozen=True)
class Detached:
    """The detached `up`: its process, and whether it said the cluster is ready."""

    pid: int
    ready: bool
    returncode: int | None
    """Its exit status when it did not become ready (negative: the signal), else None."""
    output: str
    """What it wrote to its log before it became ready or gave up (its errors)."""


def start_detached(argv: list[str], data_dir: Path, timeout: float) -> Detached:
    """Run `raftkube up ARGV --ready-fd N` in its own session, its output appended to the
    supervisor log, and wait (at most `timeout`) until it writes READY on the pipe or exits.
    Not ready in time: it is interrupted (so that it stops what it started) and awaited."""
    log_path = supervisor_dir(data_dir) / LOG_FILE
    disk.make_dirs(log_path.parent)
    log = disk.open_log(log_path)
    start_offset = os.fstat(log).st_size
    r, w = os.pipe()
    try:
        pid = _spawn_up([*argv, "--ready-fd", str(w)], log, r, w)
    finally:
        os.close(log)
        os.close(w)
    got = b""
    deadline = time.monotonic() + timeout
    try:
        while READY not in got and time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], min(1.0, max(0.0, deadline - time.monotonic())))
            if ready:
                chunk = os.read(r, 64)
                if not chunk:
                    break  # it exited (or closed the pipe) without being ready
                got += chunk[:64]
    except KeyboardInterrupt:
        _interrupt(pid)
        raise
    finally:
        os.close(r)
    ok = READY in got
    code = None if ok else _interrupt(pid)
    return Detached(pid, ok, code, _read_from(log_path, start_offset))


def _spawn_up(up_argv: list[str], log: int, r: int, w: int) -> int:
    """The supervising `up`, in a session of its own, reading nothing, writing to `log`.

    Forked, it runs in this interpreter, which has imported what `up` needs already: a second
    interpreter spent about 0.5 s importing them again before starting anything, on every
    `up --detach` (68 of them in the test suite).  A fork copies only the calling thread, so
    with other threads running (none in `raftkube up`, but a caller of this function may have
    some) the second interpreter is started instead, as before."""
    if threading.active_count() > 1:
        os.set_inheritable(w, True)
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            return os.posix_spawn(
                sys.executable,
                [sys.executable, "-m", "components.cli", "up", *up_argv],
                child_env(),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, devnull, 0),
                    (os.POSIX_SPAWN_DUP2, log, 1),
                    (os.POSIX_SPAWN_DUP2, log, 2),
                ],
                setsid=True,
            )
        finally:
            os.close(devnull)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # what this process printed must not be printed again by the child
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        os.close(r)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.environ.update(child_env())  # the parts it starts find this checkout, as before
        from components.cli.main import main  # noqa: PLC0415 - it imports this module

        code = main(["up", *up_argv])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # said on its log, then the exit status says it
        traceback.print_exc()
    finally:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _interrupt(pid: int) -> int | None:
    """SIGINT (its Ctrl-C: it stops what it started), SIGKILL if it will not exit; its exit
    status (None if it could not be awaited)."""
    code = _reap(pid, 0)
    if code is not None:
        return code
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    code = _reap(pid, 60)
    if code is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        code = _reap(pid, 10)
    return code


def _reap(pid: int, timeout: float) -> int | None:
    """Wait up to `timeout` seconds for our child `pid` to exit; its exit status (negative:
    the signal that ended it), or None if it still runs (or is not ours to wait for)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _read_from(path: Path, offset: int, limit: int = 64 * 1024) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def signal_ready(fd: int) -> None:
    """Tell the `up --detach` that started us that the cluster is ready (and let it return)."""
    with contextlib.suppress(OSError):
        os.write(fd, READY)
    with contextlib.suppress(OSError):
        os.close(fd)


__all__ = [
    "Detached",
    "Part",
    "Supervisor",
    "ago",
    "exit_reason",
    "log_tail",
    "read_restarts",
    "signal_ready",
    "start_detached",
    "supervisor_dir",
]
