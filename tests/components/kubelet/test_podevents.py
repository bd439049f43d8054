"""What the pod worker tells in Events, with the real process runtime: kube's reasons and words,
the container named by its field path, and a lasting condition told when it begins rather than
at every sync (the kubelet syncs each pod every second)."""

from __future__ import annotations

import time

from components.kubelet.backoff import CrashBackOff
from components.kubelet.podworker import PodEvent, PodWorker, ready_pod
from components.kubelet.process_runtime import ProcessRuntime
from machinery.objects import Obj
from tests.components.kubelet.test_podworker import NO_SOURCES, drive, pod, sh, state


def told(events: list[PodEvent], reason: str) -> list[PodEvent]:
    return [e for e in events if e.reason == reason]


def test_a_started_pod_tells_pulled_created_and_started_for_each_container(runtime: ProcessRuntime) -> None:
    p = pod("ev-a", sh("app", "exec sleep 30"), inits=(sh("init", "true"),), restartPolicy="Always")
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    drive(w, ready_pod, "the pod Ready")
    events = w.take_events()
    assert [(e.type, e.reason, e.message, e.field_path) for e in events] == [
        ("Normal", "Pulled", 'Container image "busybox" already present on machine', "spec.initContainers{init}"),
        ("Normal", "Created", "Created container: init", "spec.initContainers{init}"),
        ("Normal", "Started", "Started container init", "spec.initContainers{init}"),
        ("Normal", "Pulled", 'Container image "busybox" already present on machine', "spec.containers{app}"),
        ("Normal", "Created", "Created container: app", "spec.containers{app}"),
        ("Normal", "Started", "Started container app", "spec.containers{app}"),
    ]
    assert w.take_events() == []  # taken once


def test_a_crash_loop_tells_back_off_once_per_wait(runtime: ProcessRuntime) -> None:
    p = pod("ev-b", sh("app", "exit 1"), restartPolicy="Always")
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1", backoff=CrashBackOff(initial=2.0, cap=2.0))
    # the first restart is at once; the second waits 2 s: told once, however many syncs it takes
    status = drive(w, lambda s: state(s, "app")["restartCount"] >= 2, "two restarts")
    events = w.take_events()
    assert [(e.type, e.message, e.field_path) for e in told(events, "BackOff")] == [
        ("Warning", "Back-off restarting failed container app in pod p-ev-b_ns(ev-b)", "spec.containers{app}")
    ]
    assert len(told(events, "Started")) == state(status, "app")["restartCount"] + 1


def test_a_missing_config_map_is_told_once_while_it_lasts(runtime: ProcessRuntime) -> None:
    app = sh("app", "sleep 30", envFrom=[{"configMapRef": {"name": "settings"}}])
    w = PodWorker(pod("ev-c", app), runtime, NO_SOURCES, host_ip="127.0.0.1")
    for now in (1000.0, 1001.0, 1002.0):
        w.sync(now)
    assert [(e.type, e.reason, e.message) for e in w.take_events()] == [
        ("Warning", "Failed", 'Error: configmap "settings" not found')
    ]


def test_an_image_that_cannot_be_pulled_tells_each_attempt_and_its_back_off(runtime: ProcessRuntime) -> None:
    w = PodWorker(pod("ev-d", {"name": "app", "image": "example.com/app:1"}), runtime, NO_SOURCES, host_ip="127.0.0.1")
    for now in (1000.0, 1001.0, 1002.0, 1010.5, 1011.0):
        w.sync(now)
    said = [(e.reason, e.message.split(":")[0]) for e in w.take_events()]
    attempt = [("Failed", 'Failed to pull image "example.com/app'), ("Failed", "Error")]
    back_off = [("BackOff", 'Back-off pulling image "example.com/app'), ("Failed", "Error")]
    assert said == attempt + back_off + attempt + back_off


def test_a_failed_probe_is_unhealthy_with_why(runtime: ProcessRuntime) -> None:
    app = sh("app", "exec sleep 30", readinessProbe={"exec": {"command": ["false"]}, "periodSeconds": 1})
    w = PodWorker(pod("ev-e", app), runtime, NO_SOURCES, host_ip="127.0.0.1")
    drive(w, lambda s: "running" in state(s, "app")["state"], "running")
    deadline = time.monotonic() + 10
    while not (due := w.due_probes(time.time())):
        assert time.monotonic() < deadline, "no probe due"
        time.sleep(0.05)
    name, _spec, tracker = due[0]
    w.record_probe(name, tracker, False, time.time(), "command exited 1")
    unhealthy = told(w.take_events(), "Unhealthy")
    assert [(e.type, e.message, e.field_path) for e in unhealthy] == [
        ("Warning", "Readiness probe failed: command exited 1", "spec.containers{app}")
    ]


def test_a_deleted_pod_tells_killing_once_per_container(runtime: ProcessRuntime) -> None:
    p: Obj = pod("ev-f", sh("app", "trap '' TERM; sleep 30"), terminationGracePeriodSeconds=1)
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    drive(w, lambda s: "running" in state(s, "app")["state"], "running")
    w.take_events()
    w.pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    drive(w, lambda s: "terminated" in state(s, "app")["state"], "stopped")
    assert [(e.reason, e.message, e.field_path) for e in w.take_events()] == [
        ("Killing", "Stopping container app", "spec.containers{app}")
    ]
