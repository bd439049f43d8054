"""A pod's effective requests and limits: component-helpers' PodRequests and PodLimits, the one
rule the scheduler, quota and LimitRange all count by.

Per resource: the larger of (regular containers + sidecars) and, for each plain init container,
its own amount plus the sidecars started before it; then the pod overhead (on requests always, on
limits only where a non-zero limit is set)."""

from __future__ import annotations

from typing import Any

import pytest

from machinery.podresources import pod_limits, pod_requests
from machinery.quantity import parse_quantity

Resources = dict[str, str]


def c(requests: Resources | None = None, limits: Resources | None = None, *, sidecar: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    out: dict[str, Any] = {"name": "c", "resources": resources}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def spec(containers: list[Any], init: list[Any] | None = None, overhead: Resources | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"containers": containers}
    if init is not None:
        out["initContainers"] = init
    if overhead is not None:
        out["overhead"] = overhead
    return out


def strs(resources: dict[str, Any]) -> Resources:
    return {name: str(q) for name, q in resources.items()}


CASES: list[tuple[str, dict[str, Any], Resources, Resources]] = [
    # (what, spec, effective requests, effective limits)
    ("no containers", spec([]), {}, {}),
    (
        "regular containers add up",
        spec([c({"cpu": "100m"}), c({"cpu": "200m", "memory": "1Gi"})]),
        {"cpu": "300m", "memory": "1Gi"},
        {},
    ),
    (
        "a plain init container larger than the sum wins",
        spec([c({"cpu": "300m"})], [c({"cpu": "1"})]),
        {"cpu": "1"},
        {},
    ),
    (
        "a plain init container smaller than the sum does not count",
        spec([c({"cpu": "300m"})], [c({"cpu": "200m"})]),
        {"cpu": "300m"},
        {},
    ),
    (
        "a sidecar before a plain init container runs beside it",
        spec([c({"cpu": "100m"})], [c({"cpu": "200m"}, sidecar=True), c({"cpu": "500m"})]),
        {"cpu": "700m"},
        {},
    ),
    (
        "a sidecar after a plain init container does not run beside it",
        spec([c({"cpu": "100m"})], [c({"cpu": "500m"}), c({"cpu": "200m"}, sidecar=True)]),
        {"cpu": "500m"},
        {},
    ),
    (
        "sidecars add to the regular containers",
        spec([c({"cpu": "100m"})], [c({"cpu": "50m"}), c({"cpu": "200m"}, sidecar=True)]),
        {"cpu": "300m"},
        {},
    ),
    (
        "only the sidecars started before a plain init container count beside it",
        spec(
            [c({"cpu": "50m"})],
            [c({"cpu": "100m"}, sidecar=True), c({"cpu": "300m"}), c({"cpu": "200m"}, sidecar=True)],
        ),
        {"cpu": "400m"},
        {},
    ),
    (
        "sidecars alone: their sum",
        spec([], [c({"cpu": "100m"}, sidecar=True), c({"cpu": "200m"}, sidecar=True)]),
        {"cpu": "300m"},
        {},
    ),
    (
        "each resource takes its own maximum",
        spec([c({"cpu": "1", "memory": "64Mi"})], [c({"cpu": "500m", "memory": "1Gi"})]),
        {"cpu": "1", "memory": "1Gi"},
        {},
    ),
    (
        "a restartPolicy other than Always is a plain init container",
        spec([c({"cpu": "100m"})], [{**c({"cpu": "200m"}), "restartPolicy": "OnFailure"}]),
        {"cpu": "200m"},
        {},
    ),
    (
        "overhead adds to every request, set or not",
        spec([c({"cpu": "100m"})], overhead={"cpu": "50m", "memory": "10Mi"}),
        {"cpu": "150m", "memory": "10Mi"},
        {},
    ),
    (
        "overhead adds to a limit only where one is set",
        spec([c(limits={"cpu": "1"})], overhead={"cpu": "50m", "memory": "10Mi"}),
        {"cpu": "1050m", "memory": "10Mi"},
        {"cpu": "1050m"},
    ),
    (
        "overhead does not add to a zero limit",
        spec([c({"cpu": "0"}, {"cpu": "0"})], overhead={"cpu": "50m"}),
        {"cpu": "50m"},
        {"cpu": "0"},
    ),
    (
        "limits follow the same rule, sidecars included",
        spec([c(limits={"cpu": "1"})], [c(limits={"cpu": "500m"}, sidecar=True), c(limits={"cpu": "2"})]),
        {"cpu": "2500m"},
        {"cpu": "2500m"},
    ),
    (
        "a request defaults to its container's limit",
        spec([c({"memory": "1Gi"}, {"cpu": "2", "memory": "2Gi"})]),
        {"cpu": "2", "memory": "1Gi"},
        {"cpu": "2", "memory": "2Gi"},
    ),
    (
        "containers without resources add nothing",
        spec([c(), {"name": "bare"}, c({"memory": "1Gi"})], [c(sidecar=True), c()]),
        {"memory": "1Gi"},
        {},
    ),
    (
        "unparseable values and malformed entries count as nothing",
        spec([c({"cpu": "lots", "memory": "1Gi"}), "x", {"resources": "y"}], [None], overhead={"cpu": "?"}),
        {"memory": "1Gi"},
        {},
    ),
]


@pytest.mark.parametrize(("what", "pod_spec", "requests", "limits"), CASES, ids=[case[0] for case in CASES])
def test_pod_requests_and_limits(what: str, pod_spec: dict[str, Any], requests: Resources, limits: Resources) -> None:
    assert strs(pod_requests(pod_spec)) == requests, what
    assert strs(pod_limits(pod_spec)) == limits, what


def test_malformed_specs_ask_for_nothing() -> None:
    for bad in ({}, {"containers": "x", "initContainers": 3, "overhead": []}):
        assert pod_requests(bad) == {} and pod_limits(bad) == {}


def test_overhead_can_be_left_out() -> None:
    """LimitRange bounds what the containers ask for, without the runtime's overhead."""
    s = spec([c({"cpu": "100m"}, {"cpu": "1"})], overhead={"cpu": "50m"})
    assert strs(pod_requests(s, overhead=False)) == {"cpu": "100m"}
    assert strs(pod_limits(s, overhead=False)) == {"cpu": "1"}


def test_non_missing_stands_in_for_requests_a_container_does_not_state() -> None:
    """The scheduler scores a container that requests nothing as if it asked for kube's defaults;
    a request stated as zero stays zero, and init containers and sidecars are counted by the same rule."""
    defaults = {"cpu": parse_quantity("100m"), "memory": parse_quantity("200Mi")}
    s = spec(
        [c(), c({"cpu": "0", "memory": "1Gi"}), c({"cpu": "300m"})],
        [c({"memory": "4Gi"}), c({"cpu": "1"}, sidecar=True)],
        overhead={"cpu": "10m"},
    )
    # cpu: containers 100m + 0 + 300m, sidecar 1 -> 1400m; plain init 100m; + 10m overhead
    # memory: containers 200Mi + 1Gi + 200Mi, sidecar 200Mi -> 1624Mi; plain init 4Gi + nothing before it
    assert strs(pod_requests(s, non_missing=defaults)) == {"cpu": "1410m", "memory": "4Gi"}
    assert strs(pod_requests(s)) == {"cpu": "1310m", "memory": "4Gi"}
