"""The process runtime with real processes: exit codes and kube's reasons, logs in the CRI
format, SIGTERM then SIGKILL after the grace period, a start that fails, attempts counted,
and a second runtime (a restarted kubelet) adopting a container that still runs.  Every wait
is bounded, and every container is stopped by the test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.kubelet import containerlog, sandbox, security
from components.kubelet.process_runtime import ProcessRuntime, RunState
from components.kubelet.sandbox import Sandbox
from components.kubelet.shim import START_DELAY_ENV
from tests.support.wait import until

UID = "u-1"


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[ProcessRuntime]:
    rt = ProcessRuntime(tmp_path / "rt")
    yield rt
    left = [(uid, c.name) for uid in rt.running_pods() for c in (rt.root / "containers" / uid).iterdir()]
    for uid, name in left:  # whatever a failed test left running, killed by pid
        rt.stop(uid, name, 0.0, time.monotonic())
    until(
        "every container and its shim to end",
        lambda: not any((rt.seen(u, n) or RunState(0, False)).running for u, n in left),
    )


def finished(rt: ProcessRuntime, name: str) -> RunState | None:
    s = rt.seen(UID, name)
    return s if s is not None and not s.running else None


def test_a_container_that_exits_reports_its_code_and_its_output_is_logged(runtime: ProcessRuntime) -> None:
    runtime.start("ns", "p", UID, "c", ["sh", "-c", "echo hello; echo oops >&2; exit 3"], {"PATH": "/usr/bin:/bin"})
    s = until("the container to exit", lambda: finished(runtime, "c"))
    assert (s.exit_code, s.reason, s.attempt) == (3, "Error", 0) and s.started_at and s.finished_at
    entries = containerlog.read(Path(s.log))
    assert sorted((e.stream, e.text) for e in entries) == [("stderr", b"oops"), ("stdout", b"hello")]
    runtime.start("ns", "p", UID, "c", ["true"], {"PATH": "/usr/bin:/bin"})
    s = until("the second run", lambda: finished(runtime, "c"))
    assert (s.exit_code, s.reason, s.attempt) == (0, "Completed", 1)


def test_stop_sends_sigterm_and_kills_after_the_grace_period(runtime: ProcessRuntime) -> None:
    runtime.start("ns", "p", UID, "polite", ["sleep", "30"], {"PATH": "/usr/bin:/bin"})
    runtime.start("ns", "p", UID, "stubborn", ["sh", "-c", "trap '' TERM; sleep 30"], {"PATH": "/usr/bin:/bin"})
    until(
        "both running",
        lambda: all((runtime.seen(UID, n) or RunState(0, False)).running for n in ("polite", "stubborn")),
    )
    until(
        "the shims to have started them",
        lambda: all(
            (runtime.root / "containers" / UID / n / "0" / "state.json").exists() for n in ("polite", "stubborn")
        ),
    )
    t0 = time.monotonic()
    runtime.stop(UID, "polite", 5.0, t0)
    runtime.stop(UID, "stubborn", 0.5, t0)
    assert until("SIGTERM to end the polite one", lambda: finished(runtime, "polite")).exit_code == 143
    time.sleep(0.6)
    assert (runtime.seen(UID, "stubborn") or RunState(0, False)).running  # it ignores SIGTERM
    runtime.tick(time.monotonic())
    assert until("SIGKILL after the grace period", lambda: finished(runtime, "stubborn")).exit_code == 137


def test_an_executable_runs_under_the_argv0_the_container_names(runtime: ProcessRuntime) -> None:
    """An image's program known by an in-image path (`/agnhost-2`) runs the host's program, and
    sees the path it was called by."""
    script = "import sys; print(sys.orig_argv[0])"
    argv = ["/in-image/python", "-c", script]
    runtime.start("ns", "p", UID, "named", argv, {"PATH": "/usr/bin:/bin"}, executable=sys.executable)
    s = until("the container to exit", lambda: finished(runtime, "named"))
    assert s.exit_code == 0, containerlog.read(Path(s.log))
    assert [e.text for e in containerlog.read(Path(s.log)) if e.stream == "stdout"] == [b"/in-image/python"]


def test_once_start_returns_the_run_has_its_start_time_or_its_start_error(
    runtime: ProcessRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """start() returns only once the shim has written what happened: a kubelet that looks at once
    sees a start time (a live shim without one was reported Running with an empty startedAt).
    The shim is made slow to start (the shim passes its environment on to the keeper)."""
    monkeypatch.setenv(START_DELAY_ENV, "0.3")
    for n in range(3):
        runtime.start("ns", "p", UID, f"c{n}", ["sleep", "30"], {"PATH": "/usr/bin:/bin"})
        s = runtime.seen(UID, f"c{n}")
        assert s is not None and s.running and s.started_at, s
    runtime.start("ns", "p", UID, "bad", ["/nonexistent/binary"], {})
    s = runtime.seen(UID, "bad")
    assert s is not None and not s.running and s.reason == "StartError", s
    for n in range(3):
        runtime.stop(UID, f"c{n}", 0.0, time.monotonic())


def test_a_stop_while_the_container_is_being_started_reaches_it(
    runtime: ProcessRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM to a keeper that has not started its container yet (the kubelet deletes a pod it
    has just started) is passed on once the container runs: it ends with 143 at once, not with
    137 when the grace period runs out (the keeper used to die of the signal; a flake under load
    in clean run 2, test_a_restarted_kubelet_adopts_a_running_container)."""
    monkeypatch.setenv(START_DELAY_ENV, "1.0")
    starting = threading.Thread(
        target=runtime.start, args=("ns", "p", UID, "c", ["sh", "-c", "exec sleep 30"], {"PATH": "/usr/bin:/bin"})
    )
    starting.start()
    try:
        shim_file = runtime.root / "containers" / UID / "c" / "0" / "shim.json"
        until("the keeper's pid", lambda: shim_file.exists() and b"shimPid" in shim_file.read_bytes())
        begun = time.monotonic()
        runtime.stop(UID, "c", 10.0, begun)
    finally:
        starting.join(timeout=30)
    s = until("the container to end", lambda: finished(runtime, "c"))
    assert s.exit_code == 143, s
    assert time.monotonic() - begun < 8.0  # not the grace period's SIGKILL


def test_a_command_that_cannot_start_is_a_start_error(runtime: ProcessRuntime) -> None:
    runtime.start("ns", "p", UID, "c", ["/nonexistent/binary"], {})
    s = until("the failed start", lambda: finished(runtime, "c"))
    assert (s.exit_code, s.reason) == (128, "StartError") and "nonexistent" in s.message
    with pytest.raises(ValueError, match="nothing to run"):
        runtime.start("ns", "p", UID, "c", [], {})


def test_a_restarted_kubelet_adopts_a_running_container(runtime: ProcessRuntime) -> None:
    runtime.start("ns", "p", UID, "c", ["sh", "-c", "echo up; exec sleep 30"], {"PATH": "/usr/bin:/bin"})
    until("running", (runtime.root / "containers" / UID / "c" / "0" / "state.json").exists)
    again = ProcessRuntime(runtime.root)  # the kubelet came back: not the shim's parent any more
    assert again.running_pods() == [UID]
    s = again.seen(UID, "c")
    assert s is not None and s.running and s.attempt == 0
    again.stop(UID, "c", 5.0, time.monotonic())
    assert until("the adopted container to stop", lambda: finished(again, "c")).exit_code == 143
    assert [e.text for e in containerlog.read(Path(s.log))] == [b"up"]
    again.remove_pod(UID, "ns", "p")
    assert again.running_pods() == [] and not Path(s.log).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a container's user needs root")
def test_a_container_of_another_user_runs_an_image_program_it_cannot_reach(
    runtime: ProcessRuntime, tmp_path: Path
) -> None:
    """An image's program is the container user's to run; here it may be a host file under a
    directory only root enters (the built agnhost under /root/.cache): conformance 'Projected
    configMap ... as non-root' failed with Permission denied before the shim ran it by descriptor."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    program = private / "busybox"
    shutil.copy2("/bin/busybox", program)
    box = Sandbox(user=(1001, 1001, ()))
    runtime.start("ns", "p", UID, "app", ["/image/busybox", "id", "-u"], {}, sandbox=box, executable=str(program))
    s = until("the container to end", lambda: finished(runtime, "app"), 20.0)
    out = b"".join(e.text for e in containerlog.read(Path(s.log))).decode()
    assert (s.exit_code, out.strip()) == (0, "1001"), out


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a container's user needs root")
@pytest.mark.parametrize(("no_new_privs", "euid"), [(False, "0"), (True, "1001")])
def test_allow_privilege_escalation_false_keeps_a_setuid_program_at_the_callers_uid(
    runtime: ProcessRuntime, tmp_path: Path, no_new_privs: bool, euid: str
) -> None:
    """Conformance 'should not allow privilege escalation when false': a setuid-root program
    (the nonewprivs image's) run as uid 1001 gains uid 0 unless the container has no_new_privs."""
    program = tmp_path / "setuid-id"
    shutil.copy2("/usr/bin/id", program)
    program.chmod(0o4755)
    box = Sandbox(user=(1001, 1001, ()), no_new_privs=no_new_privs)
    name = f"nnp-{no_new_privs}".lower()
    runtime.start("ns", "p", UID, name, ["/image/id", "-u"], {}, sandbox=box, executable=str(program))
    s = until("the container to end", lambda: finished(runtime, name), 20.0)
    out = b"".join(e.text for e in containerlog.read(Path(s.log))).decode()
    assert (s.exit_code, out.strip()) == (0, euid), out


def test_exec_into_a_container_without_new_privileges_has_none_either(runtime: ProcessRuntime) -> None:
    """kubectl exec's process takes the container's no_new_privs, as runc's exec does."""
    box = Sandbox(no_new_privs=True)
    runtime.start("ns", "p", UID, "c", ["sleep", "30"], {"PATH": "/usr/bin:/bin"}, sandbox=box)
    pid = until("the container to run", lambda: runtime.main_pid(UID, "c"))
    script = ["grep", "NoNewPrivs", "/proc/self/status"]
    seen = subprocess.run(script, preexec_fn=sandbox.join(pid), capture_output=True, timeout=10, check=True)
    assert seen.stdout.split() == [b"NoNewPrivs:", b"1"]


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping capabilities needs root")
def test_a_root_container_that_is_not_privileged_has_only_its_capabilities_and_so_has_exec(
    runtime: ProcessRuntime,
) -> None:
    """Conformance 'should run the container as unprivileged when false': a root process
    without NET_ADMIN cannot add a link to the node's network (EPERM); its CapEff is its set,
    and a process exec'd into it gets no more."""
    keep = security.DEFAULT_CAPABILITIES
    box = Sandbox(capabilities=keep)
    script = "grep CapEff /proc/self/status; ip link add raftkube-dummy0 type dummy; sleep 30"
    runtime.start("ns", "p", UID, "c", ["sh", "-c", script], {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, sandbox=box)
    mask = f"{sum(1 << cap for cap in keep):016x}"

    def said() -> str | None:
        s = runtime.seen(UID, "c")
        text = b"\n".join(e.text for e in containerlog.read(Path(s.log))).decode() if s and s.log else ""
        return text if "Operation not permitted" in text else None

    out = until("the container's output", said)
    assert f"CapEff:\t{mask}" in out, out
    assert "raftkube-dummy0" not in subprocess.run(["ip", "link"], capture_output=True, check=True, text=True).stdout
    pid = until("the container to run", lambda: runtime.main_pid(UID, "c"))
    grep = ["grep", "CapEff", "/proc/self/status"]
    seen = subprocess.run(grep, preexec_fn=sandbox.join(pid), capture_output=True, timeout=10, check=True, text=True)
    assert seen.stdout.split() == ["CapEff:", mask]
