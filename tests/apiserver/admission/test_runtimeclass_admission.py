"""RuntimeClass admission: an unknown class refuses the pod; a class's overhead and scheduling
become the pod's (kube's plugin/pkg/admission/runtimeclass)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.runtimeclass import RuntimeClassAdmission
from apiserver.auth.user import User
from apiserver.resources import core_pods
from machinery.objects import Obj

ANN = User("ann", ("system:authenticated",))
GVISOR: Obj = {
    "metadata": {"name": "gvisor"},
    "handler": "runsc",
    "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
    "scheduling": {
        "nodeSelector": {"runtime": "gvisor"},
        "tolerations": [{"key": "sandboxed", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


class Classes:
    def __init__(self, *items: Obj) -> None:
        self.items = {i["metadata"]["name"]: i for i in items}

    def get_object(self, namespace: str | None, name: str) -> Obj | None:
        return self.items.get(name)


def pod(**spec: Any) -> Obj:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def create(obj: Obj) -> AdmissionRequest:
    return AdmissionRequest("CREATE", core_pods.RESOURCE, "", "default", "p", ANN, obj, None)


def refusal(coro: Any) -> str:
    with pytest.raises(errors.StatusError) as e:
        asyncio.run(coro)
    assert e.value.code == 403 and e.value.reason == "Forbidden"
    return e.value.message


def test_a_pod_naming_an_unknown_runtime_class_is_forbidden() -> None:
    plugin = RuntimeClassAdmission(Classes())
    assert refusal(plugin.admit(create(pod(runtimeClassName="nope")))) == (
        'pods "p" is forbidden: pod rejected: RuntimeClass "nope" not found'
    )


def test_a_class_the_cache_has_not_seen_is_read_from_storage() -> None:
    async def fetch(name: str) -> Obj | None:
        return GVISOR if name == "gvisor" else None

    plugin = RuntimeClassAdmission(Classes(), fetch)
    p = pod(runtimeClassName="gvisor")
    asyncio.run(plugin.admit(create(p)))
    assert p["spec"]["overhead"] == {"cpu": "250m", "memory": "120Mi"}


def test_the_class_sets_overhead_node_selector_and_tolerations() -> None:
    plugin = RuntimeClassAdmission(Classes(GVISOR))
    own = {"key": "x", "operator": "Exists"}
    p = pod(runtimeClassName="gvisor", nodeSelector={"zone": "a"}, tolerations=[own])
    asyncio.run(plugin.admit(create(p)))
    asyncio.run(plugin.validate(create(p)))
    assert p["spec"]["overhead"] == {"cpu": "250m", "memory": "120Mi"}
    assert p["spec"]["nodeSelector"] == {"zone": "a", "runtime": "gvisor"}
    assert p["spec"]["tolerations"] == [own, GVISOR["scheduling"]["tolerations"][0]]


def test_an_overhead_that_is_not_the_classes_is_refused() -> None:
    plugin = RuntimeClassAdmission(Classes(GVISOR, {"metadata": {"name": "plain"}, "handler": "runc"}))
    same = pod(runtimeClassName="gvisor", overhead={"cpu": "0.25", "memory": "120Mi"})
    asyncio.run(plugin.admit(create(same)))  # the same quantities, written otherwise
    other = pod(runtimeClassName="gvisor", overhead={"cpu": "1"})
    assert refusal(plugin.admit(create(other))).endswith(
        "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
    )
    without = pod(runtimeClassName="plain", overhead={"cpu": "1"})
    asyncio.run(plugin.admit(create(without)))
    assert refusal(plugin.validate(create(without))).endswith(
        "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
    )


def test_a_node_selector_conflicting_with_the_classes_is_refused() -> None:
    plugin = RuntimeClassAdmission(Classes(GVISOR))
    p = pod(runtimeClassName="gvisor", nodeSelector={"runtime": "runc"})
    assert refusal(plugin.admit(create(p))).endswith(
        "conflict: runtimeClass.scheduling.nodeSelector[runtime] = gvisor; pod.spec.nodeSelector[runtime] = runc"
    )


def test_only_pod_creates_are_handled_and_a_pod_without_a_class_is_left_alone() -> None:
    plugin = RuntimeClassAdmission(Classes(GVISOR))
    p = pod()
    asyncio.run(plugin.admit(create(p)))
    asyncio.run(plugin.validate(create(p)))
    assert "overhead" not in p["spec"] and "nodeSelector" not in p["spec"]
    update = AdmissionRequest("UPDATE", core_pods.RESOURCE, "", "default", "p", ANN, p, p)
    status = AdmissionRequest("CREATE", core_pods.RESOURCE, "binding", "default", "p", ANN, p, None)
    assert not plugin.handles(update) and not plugin.handles(status) and plugin.handles(create(p))
