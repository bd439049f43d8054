"""`raftkube up` brings back what dies (components.cli.supervisor), in the foreground and with
--detach, and the cluster commands find the cluster from another directory (store.cli.locate).

Real `up` processes: the controller-manager and the scheduler are SIGKILLed by pid and must
come back (a new pid, /healthz, the Lease held again by the new process), `status` counts the
restart with its reason; a part stopped through the CLI stays down until started.  Every wait
is bounded."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.launcher import LocalApiserver
from components.cli import supervisor
from components.cli.launcher import LocalComponent
from components.cli.supervisor import BACKOFF_INITIAL_S, BACKOFF_MAX_S, Part, Supervisor
from machinery.process import launch
from store.cli import locate
from store.launcher import LocalCluster
from tests.support.cli import raftkube, raftkube_interactive

WAIT_S = 120.0
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"
LEASE_OF = {"controller-manager": "kube-controller-manager", "scheduler": "kube-scheduler"}


def until(what: str, check: Callable[[], Any], wait: float = WAIT_S) -> Any:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"no {what} within {wait:.0f}s")


def _config(tmp: Path) -> Path:
    cfg = tmp / "cluster.toml"
    # a new process takes a killed one's Lease once it expires: 4 s here, not kube's 15
    lease = json.dumps(
        ["--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3", "--leader-elect-retry-period", "1"]
    )
    cfg.write_text(
        "[store]\nmembers = 1\n[store.raft]\ntick_ms = 20\n[apiserver]\nstartup_timeout = 60.0\n[kubelets]\ncount = 0\n"
        f"[controller_manager]\nargs = {lease}\n[scheduler]\nargs = {lease}\n"
    )
    return cfg


def _env(state: Path) -> dict[str, str]:
    """As a user's shell: no RAFTKUBE_DATA_DIR (the suite's isolation), this test's own state dir."""
    env = {k: v for k, v in os.environ.items() if k != locate.DATA_DIR_ENV}
    env["XDG_STATE_HOME"] = str(state)
    return env


def _stop_all(d: Path) -> None:
    for name in ("controller-manager", "scheduler"):
        LocalComponent(d, name).stop(timeout=5)
    LocalApiserver(d).stop(timeout=5)
    if LocalCluster(d).exists():
        LocalCluster(d).stop_all(timeout=5)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _lease_holder(d: Path, component: str) -> str:
    apiserver = LocalApiserver(d)
    endpoint = apiserver.recorded()
    assert endpoint is not None
    lease = apiserver.get_json(endpoint, LEASES + LEASE_OF[component], timeout=5)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def _new_pid(component: LocalComponent, old: int) -> int | None:
    pid = component.pid()
    return pid if pid is not None and pid != old else None


def _status(d: Path, cwd: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    proc = raftkube("status", "-o", "json", cwd=cwd, env=env)  # no --data-dir: found from the state file
    assert proc.returncode in (0, 1), proc.stderr
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


def _row(rows: list[dict[str, Any]], part: str) -> dict[str, Any]:
    return next(r for r in rows if r["part"] == part)


def _kill_and_see_it_back(d: Path, name: str, cwd: Path, env: dict[str, str]) -> None:
    """SIGKILL the component by pid; `up` starts a new one, healthy, holding the Lease again;
    `status` (from another directory) counts one restart, saying why."""
    component = LocalComponent(d, name)
    old = component.pid()
    assert old is not None
    old_holder = until(f"{name} holding its Lease", lambda: _lease_holder(d, name))
    os.killpg(old, signal.SIGKILL)
    new = until(f"a new {name} process", lambda: _new_pid(component, old))
    assert not _alive(old)
    argv = Path(f"/proc/{new}/cmdline").read_bytes().split(b"\0")
    assert argv[argv.index(b"--leader-elect-lease-duration") + 1] == b"4", argv  # cluster.toml's flags again
    until(f"the new {name} healthy", lambda: component.probe(timeout=2.0)[0] == 200)
    # the old holder is dead and the new process is the only candidate: a new holder is it
    until(f"the Lease held by the new {name}", lambda: _lease_holder(d, name) not in ("", old_holder))
    row = _row(_status(d, cwd, env), name)
    assert (row["pid"], row["healthy"], row["restarts"]) == (new, True, 1), row
    assert row["last_restart"]["reason"] == "killed by SIGKILL", row
    human = raftkube("status", cwd=cwd, env=env).stdout
    assert re.search(rf"{name}\s.*\s1 \(killed by SIGKILL, \d+s ago\)", human), human
    assert "supervised by `raftkube up` (pid" in human


# ---------------------------------------------------------------------- --detach
@pytest.fixture(scope="module")
def detached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("supervised")
    d = tmp / "rk"
    env = _env(tmp / "state")
    proc = raftkube(
        "up", "--detach", "--free-ports", "--data-dir", str(d), "--config", str(_config(tmp)), env=env, timeout=240
    )
    try:
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert "RESTARTS" in proc.stdout and "supervised by `raftkube up` (pid" in proc.stdout
        yield d, env
    finally:
        raftkube("down", "--data-dir", str(d), timeout=120)
        _stop_all(d)


def test_a_killed_controller_manager_and_scheduler_come_back(
    detached: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    d, env = detached
    _kill_and_see_it_back(d, "controller-manager", tmp_path, env)
    _kill_and_see_it_back(d, "scheduler", tmp_path, env)
    log = (d / "supervisor" / "supervisor.log").read_text()
    assert re.search(r"controller-manager \(pid \d+\) killed by SIGKILL; restarting it in 1s", log), log
    assert "controller-manager log: " in log  # the tail of its log, said with its exit


def test_restart_and_status_work_from_another_directory(detached: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    d, env = detached
    before = LocalApiserver(d).pid()
    proc = raftkube("restart", "apiserver", cwd=tmp_path, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "restarted apiserver\n"
    after = LocalApiserver(d).pid()
    assert after is not None and after != before
    row = until("the apiserver ready", lambda: (r := _row(_status(d, tmp_path, env), "apiserver"))["healthy"] and r)
    assert row["restarts"] == 0  # a user's restart is not the supervisor's
    assert not (tmp_path / ".raftkube").exists()


def test_a_part_stopped_through_the_cli_stays_down_until_started(
    detached: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    d, env = detached
    scheduler = LocalComponent(d, "scheduler")
    assert raftkube("stop", "scheduler", cwd=tmp_path, env=env).returncode == 0
    time.sleep(3 * BACKOFF_INITIAL_S + 1)  # longer than the first back-off
    assert scheduler.pid() is None
    human = raftkube("status", cwd=tmp_path, env=env).stdout
    assert "stopped on purpose, not restarted until started again: scheduler" in human, human
    proc = raftkube("start", "scheduler", cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    pid = scheduler.pid()
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)  # supervised again once started
    until("the scheduler back", lambda: (p := scheduler.pid()) is not None and p != pid)


def test_down_from_another_directory_releases_the_supervisor_first(
    detached: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    d, env = detached
    supervising = int((d / "up.lock").read_text())
    assert _alive(supervising)
    cluster = LocalCluster(d)
    pids = [p for p in (cluster.pid(1), LocalApiserver(d).pid(), LocalComponent(d, "scheduler").pid()) if p]
    proc = raftkube("down", "-o", "json", cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["supervisor"] == supervising and out["store"] == [1] and out["apiserver"] is True
    until("the supervisor gone", lambda: not _alive(supervising), wait=30)
    time.sleep(2 * BACKOFF_INITIAL_S)
    assert [p for p in pids if _alive(p)] == []
    assert cluster.pid(1) is None and LocalApiserver(d).pid() is None  # nothing brought back


# ---------------------------------------------------------------------- the foreground
def test_foreground_up_brings_back_a_killed_controller_manager(tmp_path: Path) -> None:
    d = tmp_path / "fg"
    env = _env(tmp_path / "state")
    other = tmp_path / "elsewhere"
    other.mkdir()
    proc = raftkube_interactive("up", "--free-ports", "--data-dir", str(d), "--config", str(_config(tmp_path)), env=env)
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not any("Ctrl-C" in s for s in seen):
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            seen.append(line)
        assert any("Ctrl-C" in s for s in seen), (seen, proc.stderr.read() if proc.stderr else "")
        _kill_and_see_it_back(d, "controller-manager", other, env)
        deadline = time.monotonic() + 30
        said = ""
        while time.monotonic() < deadline and "controller-manager restarted" not in said:
            said = proc.stdout.readline()
            seen.append(said)
        assert any(re.match(r"supervisor \| controller-manager \(pid \d+\) killed by SIGKILL", s) for s in seen), seen
        assert "controller-manager restarted" in said, seen
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, (out, err)
        assert "stopped the controller-manager, the scheduler, the apiserver and store member(s) [1]" in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        _stop_all(d)


# ---------------------------------------------------------------------- the policy, on real processes
def _exited(pid: int) -> Callable[[], bool]:
    return lambda: launch.exit_code(pid) is not None


def test_back_off_doubles_to_the_cap_and_says_the_exit_code(tmp_path: Path) -> None:
    """A part that exits at once with code 3: restarted after 1, 2, 4 ... s (a fake clock),
    each exit said with its code and the last line of its log; capped at BACKOFF_MAX_S."""
    pid_file, log = tmp_path / "pid", tmp_path / "crashy.log"
    argv = [sys.executable, "-c", "print('about to fail', flush=True); raise SystemExit(3)"]
    part = Part("crashy", pid_file, log, lambda: launch.spawn(argv, log, pid_file))
    said: list[str] = []
    now = [0.0]
    guard = Supervisor(tmp_path, lambda: [part], said.append, clock=lambda: now[0])
    first = part.start()
    guard.poll()  # seen running (or already gone: then it is not ours)
    delays = []
    pid = first
    for _ in range(7):
        until("the crashy part to exit", _exited(pid), wait=30)
        guard.poll()  # its exit: a restart is due after the back-off
        due = guard._states["crashy"].due
        assert due is not None
        delays.append(due - now[0])
        now[0] = due
        guard.poll()  # restarted
        new = launch.read_pid(pid_file) or guard._states["crashy"].pid
        assert new is not None and new != pid
        pid = new
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, BACKOFF_MAX_S, BACKOFF_MAX_S]
    assert any(s.startswith(f"crashy (pid {first}) exit code 3; restarting it in 1s") for s in said), said
    assert "  crashy log: about to fail" in said
    assert supervisor.read_restarts(tmp_path)["crashy"]["restarts"] == 7
    assert supervisor.read_restarts(tmp_path)["crashy"]["last"]["reason"] == "exit code 3"
    until("the last one to exit", _exited(pid), wait=30)


def test_a_part_stopped_on_purpose_is_left_down_and_ends_the_supervision(tmp_path: Path) -> None:
    pid_file, log = tmp_path / "pid", tmp_path / "sleepy.log"
    part = Part(
        "sleepy",
        pid_file,
        log,
        lambda: launch.spawn([sys.executable, "-c", "import time; time.sleep(60)"], log, pid_file),
    )
    said: list[str] = []
    guard = Supervisor(tmp_path, lambda: [part], said.append)
    part.start()
    guard.poll()
    assert not guard.finished()
    assert launch.stop_process(pid_file, timeout=5)
    guard.poll()
    assert launch.read_pid(pid_file) is None and guard.finished()
    assert said == ["sleepy was stopped on purpose; not restarting it (`raftkube start sleepy`)"]


def test_a_detached_up_that_fails_while_starting_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    """The supervising `up` is forked from `up --detach` (no second interpreter): a failure
    after the fork still reaches the user, with its exit status, and what it started is stopped."""
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(_config(tmp_path).read_text().replace("startup_timeout = 60.0", "startup_timeout = 0.2"))
    data_dir = tmp_path / "rk"
    started = time.monotonic()
    proc = raftkube("up", "--detach", "--free-ports", "--data-dir", str(data_dir), "--config", str(cfg), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the apiserver was not ready within" in proc.stderr, proc.stderr
    assert time.monotonic() - started < 60
    cluster = LocalCluster(data_dir)
    assert [m for m in cluster.member_ids() if cluster.pid(m) is not None] == []
    assert LocalApiserver(data_dir).pid() is None
    assert "was not ready" in (data_dir / "supervisor" / supervisor.LOG_FILE).read_text()
