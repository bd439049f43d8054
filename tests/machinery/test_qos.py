"""A pod's QoS class, as component-helpers' GetPodQOS computes it."""

from __future__ import annotations

from typing import Any

import pytest

from machinery.qos import qos_class


def container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources}


@pytest.mark.parametrize(
    ("containers", "init", "expected"),
    [
        ([container()], [], "BestEffort"),
        ([container(requests={"ephemeral-storage": "1Gi"})], [], "BestEffort"),
        ([container(limits={"cpu": "1", "memory": "1Gi"})], [], "Guaranteed"),
        ([container(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})], [], "Guaranteed"),
        ([container(requests={"cpu": "500m"}, limits={"cpu": "1", "memory": "1Gi"})], [], "Burstable"),
        ([container(limits={"cpu": "1"})], [], "Burstable"),
        ([container(requests={"memory": "1Gi"})], [], "Burstable"),
        ([container(limits={"cpu": "1", "memory": "1Gi"}), container()], [], "Burstable"),
        ([container(limits={"cpu": "1", "memory": "1Gi"})], [container()], "Burstable"),
        ([], [container(requests={"cpu": "1"})], "Burstable"),
        # quantities, not text: the kubelet computes the class from specs nobody canonicalized
        (
            [container(requests={"cpu": "1000m", "memory": "1024Mi"}, limits={"cpu": "1", "memory": "1Gi"})],
            [],
            "Guaranteed",
        ),
        ([container(requests={"cpu": "999m", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})], [], "Burstable"),
        # zero is as good as unset; a request stated as zero does not default to the limit
        ([container(requests={"cpu": "0", "memory": "0"})], [], "BestEffort"),
        ([container(limits={"cpu": "0"})], [], "BestEffort"),
        ([container(requests={"cpu": "0"}, limits={"cpu": "1", "memory": "1Gi"})], [], "Burstable"),
        ([container(limits={"cpu": "0", "memory": "1Gi"})], [], "Burstable"),
        ([container(limits={"cpu": "lots", "memory": "1Gi"})], [], "Burstable"),
    ],
)
def test_class_from_cpu_and_memory(containers: list[Any], init: list[Any], expected: str) -> None:
    assert qos_class({"containers": containers, "initContainers": init}) == expected


def test_malformed_spec_reads_as_best_effort() -> None:
    assert qos_class({}) == "BestEffort"
    assert qos_class({"containers": "x", "initContainers": [None, 3]}) == "BestEffort"
    assert qos_class({"containers": [{"resources": "x"}]}) == "BestEffort"
