"""Lifecycle hooks: the handler a container names, each hook's bookkeeping (preStop holding the
SIGTERM back within the grace period, then at least 2 s more), and the pod worker with real
processes: preStop runs before SIGTERM, a container is not running until its postStart is
done, and a failed postStart kills the container for the policy to restart."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from components.kubelet import prober
from components.kubelet.hooks import MIN_GRACE_S, POST_START, PRE_STOP, Handler, Hooks, handler_of
from components.kubelet.podworker import PodWorker
from components.kubelet.process_runtime import ProcessRuntime
from tests.components.kubelet.test_podworker import NO_SOURCES, drive, pod, sh, state


def test_the_handler_a_container_names() -> None:
    c = {"name": "c", "lifecycle": {"preStop": {"exec": {"command": ["true"]}}, "postStart": {"sleep": {"seconds": 1}}}}
    assert handler_of(c, PRE_STOP) == Handler("exec", {"command": ["true"]})
    assert handler_of(c, POST_START) == Handler("sleep", {"seconds": 1})
    assert handler_of({"name": "c"}, PRE_STOP) is None
    assert handler_of({"name": "c", "lifecycle": {"preStop": {"grpc": {}}}}, PRE_STOP) is None
    assert handler_of({"name": "c", "lifecycle": "junk"}, PRE_STOP) is None


def test_pre_stop_holds_the_kill_within_the_grace_period() -> None:
    hooks = Hooks()
    c = {"name": "c", "lifecycle": {"preStop": {"exec": {"command": ["true"]}}}}
    assert hooks.pre_stop(c, 0, 100.0, 30.0) is None  # the hook first
    [run] = hooks.due()
    assert (run.hook, run.deadline) == (PRE_STOP, 130.0) and hooks.due() == []  # handed out once
    assert hooks.pre_stop(c, 0, 105.0, 30.0) is None  # still running
    hooks.finished(run, True, "")
    assert hooks.pre_stop(c, 0, 110.0, 30.0) == 20.0  # what is left of the grace
    late = Hooks()
    late.pre_stop(c, 0, 100.0, 5.0)
    assert late.pre_stop(c, 0, 106.0, 5.0) == MIN_GRACE_S  # outlived the grace: SIGTERM with 2 s
    assert Hooks().pre_stop({"name": "c"}, 0, 100.0, 30.0) == 30.0  # no hook: stop at once
    assert Hooks().pre_stop(c, 0, 100.0, 0.0) == 0.0  # grace 0 (a force delete): no hook


def run_hooks(worker: PodWorker, container: dict[str, Any]) -> None:
    """What the kubelet does with due hooks, inline."""
    for run in worker.due_hooks():
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        outcome = asyncio.run(
            prober.run_handler(run.handler.kind, run.handler.action, 5.0, container, "127.0.0.1", env, None)
        )
        worker.hook_done(run, outcome.ok, outcome.reason)


def test_pre_stop_runs_before_sigterm(runtime: ProcessRuntime, tmp_path: Path) -> None:
    log = tmp_path / "order"
    app = sh("app", f"trap 'echo term >> {log}; exit 0' TERM; while true; do sleep 0.1; done")
    app["lifecycle"] = {"preStop": {"exec": {"command": ["sh", "-c", f"sleep 0.3; echo prestop >> {log}"]}}}
    w = PodWorker(pod("h1", app, terminationGracePeriodSeconds=10), runtime, NO_SOURCES, host_ip="127.0.0.1")
    drive(w, lambda s: "running" in state(s, "app")["state"], "running")
    w.pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

    def stopped(s: dict[str, Any]) -> bool:
        run_hooks(w, app)
        return "terminated" in state(s, "app")["state"]

    status = drive(w, stopped, "stopped after its preStop hook")
    assert log.read_text() == "prestop\nterm\n"
    assert state(status, "app")["state"]["terminated"]["exitCode"] == 0  # it left on SIGTERM


def test_a_container_runs_once_its_post_start_is_done(runtime: ProcessRuntime, tmp_path: Path) -> None:
    marker = tmp_path / "ready"
    app = sh("app", "exec sleep 30")
    app["lifecycle"] = {"postStart": {"exec": {"command": ["touch", str(marker)]}}}
    w = PodWorker(pod("h2", app), runtime, NO_SOURCES, host_ip="127.0.0.1")
    first = w.sync(time.time())
    assert state(first, "app")["state"] == {"waiting": {"reason": "ContainerCreating"}} and not marker.exists()

    def up(s: dict[str, Any]) -> bool:
        run_hooks(w, app)
        return "running" in state(s, "app")["state"]

    drive(w, up, "running after postStart")
    assert marker.exists()


def test_a_failed_post_start_kills_the_container(runtime: ProcessRuntime) -> None:
    app = sh("app", "exec sleep 30")
    app["lifecycle"] = {"postStart": {"exec": {"command": ["false"]}}}
    w = PodWorker(pod("h3", app, terminationGracePeriodSeconds=1), runtime, NO_SOURCES, host_ip="127.0.0.1")

    def restarted(s: dict[str, Any]) -> bool:
        run_hooks(w, app)
        return state(s, "app").get("restartCount", 0) >= 1

    status = drive(w, restarted, "killed and started again")
    assert state(status, "app")["lastState"]["terminated"]["exitCode"] in (137, 143)
