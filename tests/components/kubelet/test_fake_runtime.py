"""The fake runtime on a manual clock: containers that run, exit by their annotations, honour a
stop at once and take their start latency; and the pod worker driving pods through it (an
image-only container Running, a crash loop with its back-off, a deletion)."""

from __future__ import annotations

from typing import Any

import pytest

from components.kubelet.envvars import Sources
from components.kubelet.fake_runtime import (
    EXIT_CODE,
    RUN_SECONDS,
    START_LATENCY,
    STOPPED_EXIT,
    FakeBehaviourError,
    FakeRuntime,
    behaviour,
)
from components.kubelet.podworker import PodWorker, ready_pod

T0 = 1_800_000_000.0
NO_SOURCES = Sources(lambda ns, n: None, lambda ns, n: None)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def start(rt: FakeRuntime, annotations: dict[str, str] | None = None, uid: str = "u1") -> int:
    return rt.start("ns", "p", uid, "c", [], {}, None, {"annotations": annotations or {}})


def test_a_container_runs_until_stopped() -> None:
    clock = Clock()
    rt = FakeRuntime(clock)
    assert rt.seen("u1", "c") is None and start(rt) == 0
    run = rt.seen("u1", "c")
    assert run is not None and run.running and run.started_at.startswith("2027-01-15T08:00:00")
    clock.now += 5
    rt.stop("u1", "c", 30.0, clock.now)
    run = rt.seen("u1", "c")
    assert run is not None and not run.running and (run.exit_code, run.reason) == (STOPPED_EXIT, "Error")
    assert start(rt) == 1 and rt.seen("u1", "c", 0) == run  # the next run, the old one kept
    rt.remove_pod("u1", "ns", "p")
    assert rt.seen("u1", "c") is None and rt.running_pods() == []


def test_annotations_set_run_time_exit_code_and_start_latency() -> None:
    clock = Clock()
    rt = FakeRuntime(clock)
    start(rt, {RUN_SECONDS: "2", EXIT_CODE: "3", START_LATENCY: "500"})
    assert rt.seen("u1", "c") is None  # still starting
    assert start(rt, {RUN_SECONDS: "2"}) == 0  # asked again while starting: the same run
    clock.now += 0.5
    assert rt.seen("u1", "c").running  # type: ignore[union-attr]
    clock.now += 2
    run = rt.seen("u1", "c")
    assert run is not None and (run.running, run.exit_code, run.reason) == (False, 3, "Error")
    assert run.finished_at.startswith("2027-01-15T08:00:02.5")


@pytest.mark.parametrize(
    ("annotations", "key"),
    [
        ({START_LATENCY: "-1"}, START_LATENCY),
        ({START_LATENCY: "soon"}, START_LATENCY),
        ({RUN_SECONDS: "1e12"}, RUN_SECONDS),
        ({EXIT_CODE: "256"}, EXIT_CODE),
        ({EXIT_CODE: "1.5"}, EXIT_CODE),
    ],
)
def test_bad_annotations_name_themselves(annotations: dict[str, str], key: str) -> None:
    with pytest.raises(FakeBehaviourError, match=key):
        behaviour(annotations)


def pod(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], **spec},
    }


def test_the_worker_runs_an_image_only_container() -> None:
    clock = Clock()
    worker = PodWorker(pod(), FakeRuntime(clock), NO_SOURCES, host_ip="10.0.0.7")
    status = worker.sync(clock.now)
    assert status["phase"] == "Running" and ready_pod(status)
    assert status["containerStatuses"][0]["state"]["running"] and status["podIP"] == "10.0.0.7"


def test_a_crash_loop_backs_off_and_a_bad_annotation_is_a_create_error() -> None:
    clock = Clock()
    worker = PodWorker(pod({RUN_SECONDS: "1", EXIT_CODE: "1"}), FakeRuntime(clock), NO_SOURCES, host_ip="10.0.0.7")
    worker.sync(clock.now)
    clock.now += 1.5
    worker.sync(clock.now)  # exited: the first restart is immediate
    clock.now += 1.5
    status = worker.sync(clock.now)
    [c] = status["containerStatuses"]
    assert c["restartCount"] == 1 and c["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert c["lastState"]["terminated"]["exitCode"] == 1
    bad = PodWorker(pod({EXIT_CODE: "x"}), FakeRuntime(clock), NO_SOURCES, host_ip="10.0.0.7")
    [c] = bad.sync(clock.now)["containerStatuses"]
    assert c["state"]["waiting"]["reason"] == "CreateContainerError" and EXIT_CODE in c["state"]["waiting"]["message"]


def test_a_deleted_pod_stops() -> None:
    clock = Clock()
    rt = FakeRuntime(clock)
    worker = PodWorker(pod(), rt, NO_SOURCES, host_ip="10.0.0.7")
    worker.sync(clock.now)
    worker.pod = {**worker.pod, "metadata": {**worker.pod["metadata"], "deletionTimestamp": "2027-01-15T08:00:01Z"}}
    clock.now += 1
    status = worker.sync(clock.now)
    assert not worker.running() and status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == STOPPED_EXIT


def test_a_hollow_kubelet_runs_no_probe_command_on_this_machine(tmp_path: Any) -> None:
    """An exec probe of a pod on a hollow node succeeds without running: the file it would
    create is never made."""
    import asyncio

    from components.kubelet.kubelet import Kubelet
    from components.kubelet.nodestatus import NodeConfig

    marker = tmp_path / "probed"
    probe = {"exec": {"command": ["touch", str(marker)]}, "periodSeconds": 1}
    spec = {"containers": [{"name": "c", "image": "nginx", "readinessProbe": probe}]}
    clock = Clock()
    kubelet = Kubelet(None, NodeConfig("h", "10.64.0.1", 10250), FakeRuntime(clock), clock)  # type: ignore[arg-type]
    worker = PodWorker({**pod(), "spec": spec}, kubelet.runtime, NO_SOURCES, host_ip="10.64.0.1")
    worker.sync(clock.now)
    for _ in range(3):
        clock.now += 1.1
        asyncio.run(kubelet._probe(worker, clock.now))
    assert ready_pod(worker.sync(clock.now)) and not marker.exists()
