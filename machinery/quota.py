"""What a ResourceQuota counts: each object's usage in quota resource names, which objects a
quota's scopes select, and which resource a quota name counts.

Quota admission charges a create by this usage and the quota controller recounts a namespace
by it; if the two counted differently a quota would drift between a charge and the next recount
(kube keeps the evaluators in one place, pkg/quota/v1/evaluator/core, for the same reason).

Counted: object counts (`pods`, `services`, `secrets`, `configmaps`, `count/<resource>[.<group>]`,
...), and pods' `requests.*`/`limits.*` (`cpu` and `memory` meaning requests), with the scopes
Terminating, NotTerminating, BestEffort, NotBestEffort.  A finished pod uses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from machinery.objects import as_dict
from machinery.podresources import pod_limits, pod_requests
from machinery.qos import qos_class
from machinery.quantity import Quantity, parse_quantity
from machinery.resources import GroupResource

ONE = parse_quantity(1)
# the old names kube still counts core objects by
_CORE_COUNTS = {
    "pods": "pods",
    "services": "services",
    "secrets": "secrets",
    "configmaps": "configmaps",
    "persistentvolumeclaims": "persistentvolumeclaims",
    "replicationcontrollers": "replicationcontrollers",
    "resourcequotas": "resourcequotas",
}
# the quota names a pod's usage holds besides requests.*/limits.*, and a service's
_POD_NAMES = ("pods", "cpu", "memory", "ephemeral-storage")
_SERVICE_NAMES = ("services", "services.loadbalancers", "services.nodeports")


class Counted(Protocol):
    """A resource as quota sees it: its group and plural (the apiserver's ResourceDef and
    machinery.resources.GroupResource both are one)."""

    @property
    def group(self) -> str: ...

    @property
    def plural(self) -> str: ...


def _terminal(pod: Mapping[str, Any]) -> bool:
    return as_dict(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def usage(resource: Counted, obj: Mapping[str, Any]) -> dict[str, Quantity]:
    """What one object uses, in quota resource names."""
    out: dict[str, Quantity] = {}
    count = f"count/{resource.plural}" + (f".{resource.group}" if resource.group else "")
    out[count] = ONE
    if resource.group == "" and resource.plural in _CORE_COUNTS:
        out[_CORE_COUNTS[resource.plural]] = ONE
    if resource.group == "" and resource.plural == "pods":
        if _terminal(obj):
            return {}
        spec = as_dict(obj.get("spec"))
        for name, q in pod_requests(spec).items():
            out[f"requests.{name}"] = q
            if name in ("cpu", "memory", "ephemeral-storage"):
                out[name] = q
        for name, q in pod_limits(spec).items():
            out[f"limits.{name}"] = q
    if resource.group == "" and resource.plural == "services":
        kind = as_dict(obj.get("spec")).get("type")
        if kind == "LoadBalancer":
            out["services.loadbalancers"] = ONE
        if kind in ("LoadBalancer", "NodePort"):
            out["services.nodeports"] = ONE
    return out


def in_scope(quota: Mapping[str, Any], resource: Counted, obj: Mapping[str, Any]) -> bool:
    """Whether the quota's scopes select the object (scopes select pods only)."""
    scopes = as_dict(quota.get("spec")).get("scopes")
    if not scopes:
        return True
    if not (resource.group == "" and resource.plural == "pods"):
        return False
    pod_spec = as_dict(obj.get("spec"))
    terminating = pod_spec.get("activeDeadlineSeconds") is not None
    best_effort = qos_class(pod_spec) == "BestEffort"
    wanted = {
        "Terminating": terminating,
        "NotTerminating": not terminating,
        "BestEffort": best_effort,
        "NotBestEffort": not best_effort,
    }
    return all(wanted.get(str(scope), False) for scope in scopes)


def counted_by(name: str) -> GroupResource | None:
    """The resource whose objects a quota resource name counts (None: a name nothing here
    counts, such as `requests.storage` of claims)."""
    if name in _POD_NAMES or (name.startswith(("requests.", "limits.")) and name != "requests.storage"):
        return GroupResource("", "pods")
    if name in _SERVICE_NAMES:
        return GroupResource("", "services")
    if name in _CORE_COUNTS:
        return GroupResource("", name)
    if name.startswith("count/"):
        plural, _, group = name[len("count/") :].partition(".")
        return GroupResource(group, plural)
    return None
