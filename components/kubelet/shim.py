"""`python -m components.kubelet.shim DIR`: the keeper of one container process (the role
containerd-shim plays), so that the container outlives a kubelet restart with its output
still logged and its exit code still recorded.

DIR holds `spec.json` (argv, env, cwd, log path, and the sandbox: mounts, network, limits),
written by the runtime before it starts the shim in a session of its own.  The shim forks
once and the first process exits after writing `shim.json` (the keeper's pid), so the keeper
is no child of the kubelet's.  The keeper enters the sandbox, starts the container in its own process
group, writes `state.json` (its pid and the container's, the start time), copies the
container's stdout and stderr into the CRI log, forwards SIGTERM and SIGINT to it, and when
it ends writes `exit.json` (exit code, 128 + signal for a signal, finish time, kube's reason)
and exits.  Every file is written whole (temp file, fsync, rename).

Limits (limits.py): the keeper makes the run's cgroup v2 when it can, the container's process
joins it or takes rlimits before exec, `state.json` says which (`limits.mechanism`), and the
cgroup is removed once the container ended, its OOM kills read first (reason OOMKilled).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from components.kubelet import limits, sandbox
from components.kubelet.containerlog import LogWriter, timestamp

SPEC, STATE, EXIT, SHIM = "spec.json", "state.json", "exit.json", "shim.json"
START_DELAY_ENV = "RAFTKUBE_SHIM_START_DELAY_S"  # tests only: seconds the keeper waits before starting
POLL_S = 0.2  # how often the shim looks whether the container's main process ended
DRAIN_S = 1.0  # how long output still in the pipes is read after it did


def write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, orjson.dumps(value))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def exit_reason(code: int, oom_killed: bool = False) -> str:
    """kube's terminated reasons: OOMKilled when the kernel killed in the container's cgroup
    (whatever the exit code, as containerd reports it), Completed for 0, Error otherwise."""
    if oom_killed:
        return "OOMKilled"
    return "Completed" if code == 0 else "Error"


def _reachable(argv: list[str], executable: str | None, box: sandbox.Sandbox) -> tuple[str | None, int]:
    """The program Popen runs, and the descriptor it runs through (-1: none).

    A container that runs as another user (securityContext.runAsUser) must still run its image's
    program, which in an image is the user's to read; here it is a host file that may sit where
    that user cannot go (the built peers live under /root/.cache).  So the shim, still root,
    opens the program and the container execs it through /proc/self/fd (its own descriptor:
    no path is searched again under the new user, while the file's own execute bit still
    counts).  The descriptor stays open in the container, as the price of this image layout."""
    program = executable or (argv[0] if argv and argv[0].startswith("/") else None)
    if box.user is None or program is None or os.geteuid() != 0:
        return executable, -1
    fd = os.open(program, os.O_RDONLY)  # inheritable via pass_fds; OSError: kube's StartError
    return f"/proc/self/fd/{fd}", fd


def run(directory: Path, started_w: int | None = None, pending: list[int] | None = None) -> int:
    """Keep one container (see the module docstring).  `pending`: where the SIGTERM/SIGINT
    handlers `remember_stops` installed collect the stops that come before the container runs."""
    if pending is None:
        pending = remember_stops()
    spec = orjson.loads((directory / SPEC).read_bytes())
    log = LogWriter(
        Path(spec["log"]), int(spec.get("log_max_bytes") or 10 * 1024 * 1024), int(spec.get("log_files") or 2)
    )
    box, note = sandbox.usable(sandbox.Sandbox.from_json(spec.get("sandbox")))
    if note:
        log.write("stderr", note.encode())
    cwd = spec.get("cwd") or None
    # a test lever (as the store's failpoints): a slow start, to show that the runtime waits for it
    try:
        delay = float(os.environ.get(START_DELAY_ENV) or 0)
    except ValueError:  # a malformed lever must not keep a container from starting
        delay = 0.0
    if delay > 0:
        time.sleep(min(delay, 5.0))
    report, report_w = os.pipe()
    # the run's cgroup (when cgroup v2 can hold its limits) is named after the run's directory,
    # containers/<pod uid>/<container>/<attempt>: unique on the host, as pod uids are
    cgroup = limits.cgroup(box.limits, "_".join(directory.resolve().parts[-3:]))
    program_fd = -1
    try:
        sandbox.enter(box)  # the shim joins the pod's network; the container inherits it
        executable, program_fd = _reachable(spec["argv"], spec.get("executable") or None, box)
        child = subprocess.Popen(
            spec["argv"],
            executable=executable,  # argv[0] stays the name the image knows
            pass_fds=(program_fd,) if program_fd >= 0 else (),
            env=spec.get("env") or {},
            cwd=None if box.mounts else cwd,  # with mounts, entered after them (child_preexec)
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            process_group=0,  # its own group: a signal for the container reaches its children too
            preexec_fn=sandbox.child_preexec(box, cwd, report_w, cgroup),  # noqa: PLW1509 (the shim has one thread)
        )
    except (OSError, sandbox.SandboxError, subprocess.SubprocessError) as e:
        if program_fd >= 0:
            os.close(program_fd)
        limits.release(cgroup)
        # kube's StartError: the process never ran
        os.close(report_w)
        message = os.read(report, 4096).decode(errors="replace") or str(e)  # the child's words first
        os.close(report)
        log.write("stderr", f"failed to start container: {message}\n".encode())
        log.close()
        now = timestamp(time.time_ns())
        failed = {"exitCode": 128, "reason": "StartError", "message": message, "startedAt": now, "finishedAt": now}
        write_json(directory / EXIT, failed)
        _tell_started(started_w)
        return 0
    os.close(report_w)
    os.close(report)
    if program_fd >= 0:
        os.close(program_fd)

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    started = timestamp(time.time_ns())
    enforced = limits.describe(box.limits, cgroup)
    write_json(directory / STATE, {"shimPid": os.getpid(), "pid": child.pid, "startedAt": started, "limits": enforced})
    _tell_started(started_w)
    for pending_signal in pending:  # a stop that came while the container was being started
        forward(pending_signal, None)
    streams = {child.stdout: "stdout", child.stderr: "stderr"}
    with selectors.DefaultSelector() as sel:
        for pipe in streams:
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe, selectors.EVENT_READ)
        open_pipes = len(streams)
        deadline: float | None = None
        while open_pipes:
            if deadline is None and child.poll() is not None:
                # the container's main process ended: what it left behind in its group goes too
                # (kube's runtime removes the whole container), then the pipes drain for a moment
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                deadline = time.monotonic() + DRAIN_S
            if deadline is not None and time.monotonic() > deadline:
                break
            for key, _ in sel.select(timeout=POLL_S):
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(key.fileobj)
                    open_pipes -= 1
                    continue
                log.write(streams[key.fileobj], data)  # type: ignore[index]
    code = child.wait()
    log.close()
    oom_killed = limits.release(cgroup)  # the container has ended: its cgroup goes too
    if code < 0:
        code = 128 - code  # killed by a signal: 128 + its number, as a shell (and kube) reports it
    write_json(
        directory / EXIT,
        {
            "exitCode": code,
            "reason": exit_reason(code, oom_killed),
            "startedAt": started,
            "finishedAt": timestamp(time.time_ns()),
        },
    )
    return 0


def _tell_started(started_w: int | None) -> None:
    """Releases the process the runtime waits for: the run's state (or its StartError) is on disk."""
    if started_w is not None:
        with contextlib.suppress(OSError):
            os.write(started_w, b"s")
        os.close(started_w)


def remember_stops() -> list[int]:
    """SIGTERM and SIGINT remembered, not acted on, until the container runs (then passed on).

    A stop can come as soon as the kubelet knows the keeper's pid, which is before the keeper
    has read its spec: SIGTERM's default action would end the keeper and leave the container to
    be SIGKILLed after the grace period (137 where kube's 143).  Installed before the fork, the
    handlers are the keeper's from its first instruction."""
    pending: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda got, _frame: pending.append(got))
    return pending


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / SPEC).is_file():
        print("usage: python -m components.kubelet.shim DIR (DIR/spec.json must exist)", file=sys.stderr)
        return 2
    directory = Path(argv[0])
    started_r, started_w = os.pipe()  # not inherited by the container (PEP 446)
    pending = remember_stops()  # before the fork: the kubelet may signal the keeper at once
    keeper = os.fork()
    if keeper > 0:
        # the process the runtime started records the keeper and ends as soon as the keeper has
        # written the run's state (its startedAt) or its StartError: the keeper is nobody's child
        # but init's, so a kubelet that exits or restarts leaves it running.  Ending before that
        # let the kubelet see a live shim without a start time and report the container Running
        # with an empty startedAt.  A keeper that dies first closes the pipe: read returns.
        os.close(started_w)
        write_json(directory / SHIM, {"shimPid": keeper})
        with contextlib.suppress(OSError):
            os.read(started_r, 1)
        os._exit(0)
    os.close(started_r)
    return run(directory, started_w, pending)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
