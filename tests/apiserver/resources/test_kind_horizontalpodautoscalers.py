"""HorizontalPodAutoscaler: autoscaling/v2 stored, autoscaling/v1 converted both ways over the same
storage, both validated in the v2 shape; kube's Targets cell."""

from __future__ import annotations

import copy
from typing import Any

from apiserver.resources.autoscaling_horizontalpodautoscalers import v1_to_v2, v2_to_v1
from tests.apiserver.kinds_support import causes, cells, find, headers, registry, rejected, run
from tests.apiserver.memstorage import MemStorage

V2 = find("autoscaling", "horizontalpodautoscalers", "v2")
V1 = find("autoscaling", "horizontalpodautoscalers", "v1")
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def hpa(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default"}, "spec": {"scaleTargetRef": REF, **spec}}


def test_one_object_seen_through_both_versions() -> None:
    storage = MemStorage()
    v1, v2 = registry(V1, storage), registry(V2, storage)

    async def go() -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
        await v1.create("default", hpa(maxReplicas=5, targetCPUUtilizationPercentage=60))
        return await v2.get("default", "web"), await v1.get("default", "web"), await v2.list_all("default")

    as_v2, as_v1, listed = run(go())
    assert V1.store_name == V2.store_name == "horizontalpodautoscalers"
    assert as_v2["apiVersion"] == "autoscaling/v2" and as_v2["spec"]["minReplicas"] == 1
    assert as_v2["spec"]["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}
    ]
    assert as_v1["apiVersion"] == "autoscaling/v1" and as_v1["spec"]["targetCPUUtilizationPercentage"] == 60
    assert "annotations" not in as_v1["metadata"] and [o["metadata"]["name"] for o in listed] == ["web"]


def test_v1_without_a_target_reads_back_through_v2_with_the_default_metric() -> None:
    storage = MemStorage()
    run(registry(V1, storage).create("default", hpa(maxReplicas=3)))
    got = run(registry(V2, storage).get("default", "web"))
    assert got["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80


def test_what_v1_cannot_say_rides_in_annotations_and_round_trips() -> None:
    stored = hpa(
        minReplicas=2,
        maxReplicas=10,
        metrics=[
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
            },
            {
                "type": "Pods",
                "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}},
            },
        ],
        behavior={"scaleDown": {"stabilizationWindowSeconds": 60}},
    )
    stored["apiVersion"] = "autoscaling/v2"
    stored["status"] = {
        "currentReplicas": 2,
        "desiredReplicas": 2,
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40}}}],
        "conditions": [{"type": "AbleToScale", "status": "True"}],
    }
    one = v2_to_v1(stored)
    assert (
        one["spec"]["targetCPUUtilizationPercentage"] == 50 and one["status"]["currentCPUUtilizationPercentage"] == 40
    )
    assert set(one["metadata"]["annotations"]) == {
        "autoscaling.alpha.kubernetes.io/metrics",
        "autoscaling.alpha.kubernetes.io/behavior",
        "autoscaling.alpha.kubernetes.io/conditions",
    }
    back = v1_to_v2(one)
    assert back["spec"] == stored["spec"] and back["status"]["conditions"] == stored["status"]["conditions"]
    assert back["status"]["currentMetrics"][0]["resource"]["current"] == {"averageUtilization": 40}


def test_validation_in_the_v2_shape_for_both_versions() -> None:
    assert rejected(V1, hpa(minReplicas=0, maxReplicas=0, targetCPUUtilizationPercentage=-5)) == [
        "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
        "spec.maxReplicas: Invalid value: 0: must be greater than 0",
        "spec.metrics[0].resource.target.averageUtilization: Invalid value: -5: must be greater than 0",
    ]
    bad_metrics = [
        {"type": "Pods"},
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}, "pods": {}},
        {"type": "Magic"},
    ]
    assert causes(V2, hpa(minReplicas=3, maxReplicas=2, metrics=bad_metrics)) == [
        "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
        "spec.metrics[0].pods: Required value: must populate information for the given metric source",
        "spec.metrics[1].pods: Forbidden: must populate the given metric source only",
        "spec.metrics[1].resource.target.averageUtilization: Required value: must set either a target raw value or a "
        "target utilization",
        'spec.metrics[2].type: Unsupported value: "Magic": supported values: "ContainerResource", "External", '
        '"Object", "Pods", "Resource"',
    ]
    behavior = {"scaleUp": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 4000}]}}
    assert causes(V2, hpa(maxReplicas=2, behavior=behavior)) == [
        "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than 0",
        "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 4000: must be greater than zero and less "
        "than or equal to 1800",
    ]


def test_tables() -> None:
    expected = [
        ("Name", 0),
        ("Reference", 0),
        ("Targets", 0),
        ("MinPods", 0),
        ("MaxPods", 0),
        ("Replicas", 0),
        ("Age", 0),
    ]
    assert headers(V2) == headers(V1) == expected
    obj = hpa(
        minReplicas=1,
        maxReplicas=5,
        metrics=[
            copy.deepcopy(m)
            for m in [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
                },
                {
                    "type": "Resource",
                    "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}},
                },
                {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "Value", "value": "10"}}},
            ]
        ],
    )
    obj["status"] = {
        "currentReplicas": 3,
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42}}}],
    }
    assert cells(V2, obj)[:6] == ["web", "Deployment/web", "cpu: 42%/80%, memory: <unknown>/1Gi + 1 more...", "1", 5, 3]
    assert cells(V1, hpa(maxReplicas=4))[1:6] == ["Deployment/web", "cpu: <unknown>/80%", "<unset>", 4, 0]
