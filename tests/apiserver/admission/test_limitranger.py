"""LimitRanger's `type: Pod` bounds, as kube's plugin counts a pod: its containers' effective
requests and limits (machinery.podresources, sidecars included), without the pod overhead."""

from __future__ import annotations

from typing import Any

from apiserver.admission.limitranger import compile_item, violations


def pod_bound(**bounds: dict[str, str]) -> list[Any]:
    return [compile_item({"type": "Pod", **bounds})]


def test_a_sidecar_counts_beside_the_app_containers_and_the_init_containers_after_it() -> None:
    spec = {
        "containers": [{"name": "app", "resources": {"limits": {"cpu": "600m"}}}],
        "initContainers": [
            {"name": "proxy", "restartPolicy": "Always", "resources": {"limits": {"cpu": "300m"}}},
            {"name": "setup", "resources": {"limits": {"cpu": "800m"}}},
        ],
    }
    # max(600m + 300m, 800m + the 300m proxy started before it) = 1100m
    assert violations({"spec": spec}, [], pod_bound(max={"cpu": "1"})) == [
        "maximum cpu usage per Pod is 1, but limit is 1100m"
    ]
    assert violations({"spec": spec}, [], pod_bound(max={"cpu": "1100m"})) == []


def test_the_pod_overhead_is_not_bounded() -> None:
    spec = {
        "containers": [{"name": "app", "resources": {"limits": {"memory": "1Gi"}}}],
        "overhead": {"memory": "100Mi"},
    }
    assert violations({"spec": spec}, [], pod_bound(max={"memory": "1Gi"}, min={"memory": "1Gi"})) == []
