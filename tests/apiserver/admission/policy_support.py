"""Helpers for the ValidatingAdmissionPolicy tests: policies, bindings and requests as dicts,
and a source that stands in for a watch cache."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from apiserver.admission.interface import AdmissionRequest, Operation
from apiserver.auth.user import User
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj

RESOURCES = {(r.group, r.plural): r for r in catalog()}
DEPLOYMENTS = RESOURCES[("apps", "deployments")]
PODS = RESOURCES[("", "pods")]
NAMESPACES = RESOURCES[("", "namespaces")]
CONFIGMAPS = RESOURCES[("", "configmaps")]


class Objects:
    """A watch cache stand-in: `objects()`, `generation`, `get_object`; `put`/`remove` change it."""

    def __init__(self, *objs: Obj, namespaced: bool = False) -> None:
        self._objs: dict[tuple[str, str], Obj] = {}
        self.generation = 0
        for o in objs:
            self.put(o)

    def put(self, obj: Obj) -> None:
        """Store `obj` with a new resourceVersion, as a write through the store would."""
        self.generation += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.generation)}}
        meta = obj["metadata"]
        self._objs[(meta.get("namespace", ""), meta["name"])] = obj

    def remove(self, name: str, namespace: str = "") -> None:
        del self._objs[(namespace, name)]
        self.generation += 1

    def objects(self) -> Iterator[Obj]:
        return iter([self._objs[k] for k in sorted(self._objs)])

    def get_object(self, namespace: str | None, name: str) -> Obj | None:
        return self._objs.get((namespace or "", name))


def policy(
    name: str,
    validations: list[Obj],
    *,
    rules: list[Obj] | None = None,
    failure: str | None = None,
    **spec: Any,
) -> Obj:
    if rules is None:
        rules = [
            {
                "apiGroups": ["apps"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["deployments"],
            }
        ]
    body: Obj = {"matchConstraints": {"resourceRules": rules}, "validations": validations, **spec}
    if failure is not None:
        body["failurePolicy"] = failure
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
        "spec": body,
    }


def binding(name: str, policy_name: str, actions: list[str] | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy_name, "validationActions": actions or ["Deny"], **spec},
    }


def deployment(name: str = "web", replicas: Any = 3, labels: dict[str, str] | None = None, ns: str = "default") -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {"app": name}},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "c", "image": "registry.example.com/app:1"}]}},
        },
    }


def request(
    obj: Obj | None,
    *,
    resource: ResourceDef = DEPLOYMENTS,
    operation: Operation = "CREATE",
    old: Obj | None = None,
    namespace: str | None = "default",
    subresource: str = "",
    user: User | None = None,
) -> AdmissionRequest:
    target = obj if obj is not None else old
    meta = (target or {}).get("metadata")
    name = str(meta.get("name", "")) if isinstance(meta, dict) else ""
    return AdmissionRequest(
        operation, resource, subresource, namespace, name, user or User("ann", ("devs",)), obj, old, False
    )
