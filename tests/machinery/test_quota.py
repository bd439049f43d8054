"""What a ResourceQuota counts: one rule for admission's charges and the controller's recount."""

from __future__ import annotations

from typing import Any

from machinery.objects import Obj
from machinery.quota import counted_by, in_scope, usage
from machinery.resources import GroupResource

PODS = GroupResource("", "pods")
SERVICES = GroupResource("", "services")
LEASES = GroupResource("coordination.k8s.io", "leases")


def pod(cpu: str | None = None, phase: str = "Running", **spec: Any) -> Obj:
    resources = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu, "memory": "1Gi"}} if cpu else {}
    return {"spec": {"containers": [{"name": "c", "resources": resources}], **spec}, "status": {"phase": phase}}


def strs(use: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in use.items()}


def test_a_pod_uses_its_count_and_its_effective_requests_and_limits() -> None:
    assert strs(usage(PODS, pod("250m"))) == {
        "count/pods": "1",
        "pods": "1",
        "requests.cpu": "250m",
        "cpu": "250m",
        "requests.memory": "1Gi",
        "memory": "1Gi",
        "limits.cpu": "250m",
        "limits.memory": "1Gi",
    }


def test_a_pod_with_sidecars_is_charged_what_the_scheduler_places_it_by() -> None:
    """Sidecars (restartable init containers) run beside the app containers, so quota charges
    their sum, as kube's evaluator does through PodRequests; overhead adds to every request but
    only to limits that are set."""
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}}
    setup = {"name": "i", "resources": {"requests": {"cpu": "400m"}}}
    p = pod("250m", initContainers=[sidecar, setup], overhead={"cpu": "10m", "memory": "5Mi"})
    use = strs(usage(PODS, p))
    # max(250m + 200m, 400m + the 200m sidecar started before it) + 10m overhead
    assert use["requests.cpu"] == use["cpu"] == "610m"
    assert use["requests.memory"] == "1029Mi"  # the container's limit as its request, + overhead
    assert use["limits.cpu"] == "260m" and use["limits.memory"] == "1029Mi"


def test_a_finished_pod_uses_nothing() -> None:
    assert usage(PODS, pod("1", phase="Succeeded")) == {}
    assert usage(PODS, pod("1", phase="Failed")) == {}


def test_objects_count_by_their_group_resource_and_old_core_names() -> None:
    assert strs(usage(LEASES, {})) == {"count/leases.coordination.k8s.io": "1"}
    assert strs(usage(GroupResource("", "configmaps"), {})) == {"count/configmaps": "1", "configmaps": "1"}
    assert strs(usage(SERVICES, {"spec": {"type": "LoadBalancer"}})) == {
        "count/services": "1",
        "services": "1",
        "services.loadbalancers": "1",
        "services.nodeports": "1",
    }
    assert strs(usage(SERVICES, {"spec": {"type": "NodePort"}})) == {
        "count/services": "1",
        "services": "1",
        "services.nodeports": "1",
    }


def test_scopes_select_pods_only() -> None:
    def scoped(*scopes: str) -> Obj:
        return {"spec": {"hard": {"pods": "9"}, "scopes": list(scopes)}}

    assert in_scope({"spec": {"hard": {"pods": "1"}}}, LEASES, {})  # no scopes: everything
    assert not in_scope(scoped("Terminating"), LEASES, {})
    assert in_scope(scoped("Terminating"), PODS, pod("1", activeDeadlineSeconds=5))
    assert not in_scope(scoped("Terminating"), PODS, pod("1"))
    assert in_scope(scoped("NotTerminating", "BestEffort"), PODS, pod())
    assert not in_scope(scoped("BestEffort"), PODS, pod("1"))
    assert in_scope(scoped("NotBestEffort"), PODS, pod("1"))
    assert not in_scope(scoped("PriorityClass"), PODS, pod())  # a scope not known here selects nothing


def test_counted_by() -> None:
    assert counted_by("pods") == PODS
    assert counted_by("requests.cpu") == PODS and counted_by("limits.nvidia.com/gpu") == PODS
    assert counted_by("services.nodeports") == SERVICES
    assert counted_by("secrets") == GroupResource("", "secrets")
    assert counted_by("count/leases.coordination.k8s.io") == LEASES
    assert counted_by("count/widgets") == GroupResource("", "widgets")
    assert counted_by("requests.storage") is None
    assert counted_by("nonsense") is None
