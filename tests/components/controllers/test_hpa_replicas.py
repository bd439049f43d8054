"""The autoscaler's arithmetic (kube's replica calculator and behavior), pure."""

from __future__ import annotations

from typing import Any

import pytest

from components.controllers._hpa_replicas import MetricError, decide, resource_proposal, stabilize


def pod(name: str, *requests: str | None) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "resources": {"requests": {"cpu": r}} if r is not None else {}}
        for i, r in enumerate(requests)
    ]
    return {"metadata": {"name": name}, "spec": {"containers": containers}}


def usage(*cpus: str) -> dict[str, Any]:
    return {"containers": [{"name": f"c{i}", "usage": {"cpu": c, "memory": "10Mi"}} for i, c in enumerate(cpus)]}


CPU_50 = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}


def test_utilization_proposes_replicas_for_the_measured_pods() -> None:
    pods = [pod("a", "100m"), pod("b", "100m")]
    got = resource_proposal(CPU_50, pods, {"a": usage("150m"), "b": usage("50m")}, 2)
    assert got.replicas == 4  # 100 % of requests against 50 %: twice as many
    assert got.current == {
        "type": "Resource",
        "resource": {"name": "cpu", "current": {"averageUtilization": 100, "averageValue": "100m"}},
    }
    within = resource_proposal(CPU_50, pods, {"a": usage("52m"), "b": usage("52m")}, 2)
    assert within.replicas == 2  # 52 % is within the 10 % tolerance of 50 %
    down = resource_proposal(CPU_50, pods, {"a": usage("10m"), "b": usage("10m")}, 2)
    assert down.replicas == 1


def test_average_value_and_the_ways_a_metric_cannot_tell() -> None:
    average = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "200m"}},
    }
    assert resource_proposal(average, [pod("a", None)], {"a": usage("600m")}, 1).replicas == 3
    with pytest.raises(MetricError, match="missing request for cpu in container c1 of Pod a"):
        resource_proposal(CPU_50, [pod("a", "100m", None)], {"a": usage("1m", "1m")}, 1)
    with pytest.raises(MetricError, match="did not receive metrics for targeted pods"):
        resource_proposal(CPU_50, [pod("a", "100m")], {}, 1)


def test_stabilization_keeps_the_highest_recent_proposal_before_scaling_down() -> None:
    history = [(100.0, 5), (200.0, 3)]
    assert stabilize(history, 1, current=5, now=250.0, up_window=0, down_window=300) == 5
    assert stabilize(history, 1, current=5, now=450.0, up_window=0, down_window=300) == 3
    assert stabilize(history, 1, current=5, now=600.0, up_window=0, down_window=300) == 1
    assert stabilize(history, 8, current=5, now=250.0, up_window=0, down_window=300) == 8  # up at once


def test_the_default_behavior_limits_a_scale_up_and_the_bounds_apply() -> None:
    # default scale-up: max(+4 pods, +100 %) per 15 s
    assert decide(20, 2, 1, 50, None, [], [], [], now=0.0).replicas == 6
    assert decide(20, 10, 1, 50, None, [], [], [], now=0.0).replicas == 20
    limited = decide(20, 2, 1, 50, None, [], [], [], now=0.0)
    assert limited.limited == "ScaleUpLimit"
    # pods added in the period count against it: 4 were added 5 s ago from 2
    assert decide(20, 6, 1, 50, None, [], [(-5.0, 4)], [], now=0.0).replicas == 6
    assert decide(9, 3, 1, 5, None, [], [], [], now=0.0).replicas == 5
    assert decide(9, 3, 1, 5, None, [], [], [], now=0.0).limited == "TooManyReplicas"
    assert decide(1, 3, 2, 5, {"scaleDown": {"stabilizationWindowSeconds": 0}}, [], [], [], now=0.0).replicas == 2


def test_a_disabled_policy_never_scales_that_way() -> None:
    behavior = {"scaleUp": {"selectPolicy": "Disabled"}, "scaleDown": {"stabilizationWindowSeconds": 0}}
    assert decide(10, 3, 1, 20, behavior, [], [], [], now=0.0).replicas == 3
    assert decide(1, 3, 1, 20, behavior, [], [], [], now=0.0).replicas == 1
