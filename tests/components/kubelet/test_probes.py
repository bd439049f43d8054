"""Probes over a clock the test moves: schedules, thresholds, what each kind reports before its
first verdict, startup gating liveness and readiness, and refusals that name the field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet.probes import Container, Probe, ProbeError, ProbeTracker

EXEC = {"exec": {"command": ["true"]}}


def tracker(kind: str, **fields: Any) -> ProbeTracker:
    return ProbeTracker(Probe.parse(kind, EXEC | fields, f"spec.containers[0].{kind}"), started_at=100.0)


def test_defaults_are_kubes() -> None:
    p = Probe.parse("livenessProbe", EXEC, "p")
    assert (p.initial_delay, p.period, p.timeout, p.success_threshold, p.failure_threshold) == (0, 10, 1, 1, 3)
    assert p.handler == "exec"


def test_due_after_the_initial_delay_then_every_period() -> None:
    t = tracker("readinessProbe", initialDelaySeconds=5, periodSeconds=2)
    assert not t.due(104.9) and t.due(105.0)
    t.observe(True, 105.0)
    assert not t.due(106.9) and t.due(107.0)


def test_the_initial_delay_counts_from_the_containers_own_start() -> None:
    """Conformance "readiness probe should not be ready before initial delay": the container's
    startedAt comes after the moment the kubelet asked for the start; the delay counts from it,
    and only before the first probe (a later start time moves nothing)."""
    t = tracker("readinessProbe", initialDelaySeconds=15)
    t.count_from(100.3)
    assert not t.due(115.29) and t.due(115.3)
    t.observe(True, 115.3)
    t.count_from(200.0)
    assert t.due(125.3)  # the period's schedule, not a second delay


def test_before_any_verdict_each_kind_reports_its_own_default() -> None:
    assert tracker("readinessProbe").result == "failure"
    assert tracker("livenessProbe").result == "success"
    assert tracker("startupProbe").result == "unknown"


def test_the_verdict_turns_only_after_the_threshold_in_a_row() -> None:
    t = tracker("livenessProbe", failureThreshold=3)
    assert [t.observe(ok, 100.0 + i) for i, ok in enumerate([False, False, True, False, False])] == [False] * 5
    assert t.result == "success"  # the success broke the run: two failures, not three
    assert t.observe(False, 106.0) is True and t.result == "failure" and t.kills
    r = tracker("readinessProbe", successThreshold=2)
    assert r.observe(True, 100.0) is False and r.observe(True, 110.0) is True and r.result == "success"
    assert not r.kills  # readiness never kills


def test_startup_gates_liveness_and_readiness() -> None:
    spec = {
        "startupProbe": EXEC | {"failureThreshold": 30, "periodSeconds": 1},
        "livenessProbe": EXEC,
        "readinessProbe": EXEC,
    }
    c = Container(spec, started_at=0.0, where="spec.containers[0]")
    assert not c.started and not c.ready
    assert [t.probe.kind for t in c.due(0.0)] == ["startupProbe"]  # only startup runs
    c.trackers["startupProbe"].observe(True, 0.0)
    assert c.started and not c.ready  # readiness has not said yes yet
    assert sorted(t.probe.kind for t in c.due(0.0)) == ["livenessProbe", "readinessProbe"]
    c.trackers["readinessProbe"].observe(True, 0.0)
    assert c.ready and not c.must_restart
    assert c.next_due() == 0.0  # liveness has not run yet
    c.trackers["livenessProbe"].observe(True, 0.0)
    assert c.next_due() == 10.0
    for i in range(3):
        c.trackers["livenessProbe"].observe(False, 10.0 * (i + 1))
    assert c.must_restart


def test_a_container_without_probes_is_started_and_ready() -> None:
    c = Container({}, started_at=0.0, where="spec.containers[0]")
    assert c.started and c.ready and c.next_due() is None and c.due(1e9) == []


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({}, "p: must specify exactly one handler of exec, httpGet, tcpSocket, grpc"),
        (EXEC | {"tcpSocket": {"port": 80}}, "must specify exactly one handler"),
        ({"exec": ["true"]}, "p.exec: must be an object, got list"),
        (EXEC | {"periodSeconds": 0}, "p.periodSeconds: must be at least 1, got 0"),
        (EXEC | {"failureThreshold": "3"}, "p.failureThreshold: must be an integer, got str"),
        (EXEC | {"initialDelaySeconds": True}, "p.initialDelaySeconds: must be an integer, got bool"),
        (EXEC | {"successThreshold": 2}, "p.successThreshold: must be 1 for a livenessProbe, got 2"),
        ("yes", "p: must be an object, got str"),
    ],
)
def test_bad_specs_are_refused_naming_the_field(spec: Any, says: str) -> None:
    with pytest.raises(ProbeError, match=says.replace("[", r"\[")):
        Probe.parse("livenessProbe", spec, "p")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.lists(st.booleans(), max_size=40))
def test_the_verdict_is_always_what_the_last_threshold_run_said(
    success: int, failure: int, outcomes: list[bool]
) -> None:
    t = tracker("readinessProbe", successThreshold=success, failureThreshold=failure)
    expected = "failure"
    for i, ok in enumerate(outcomes):
        t.observe(ok, 100.0 + i)
        need = success if ok else failure
        tail = outcomes[max(0, i - need + 1) : i + 1]
        if len(tail) == need and all(x == ok for x in tail):
            expected = "success" if ok else "failure"
        assert t.result == expected
