"""What a ResourceQuota's `status.used` should say, from the objects its namespace holds (pure).

The resource names and counting rules are the apiserver's quota admission's (`usage`,
`in_scope` in apiserver/admission/resourcequota.py: code shared, no server state), so the
controller's recount and admission's charges agree.  A name that counts nothing served here
(`persistentvolumeclaims`, `requests.storage`, ...) is used 0, as kube reports it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from apiserver.admission.resourcequota import in_scope, usage
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef
from machinery.quantity import Quantity, canonical, parse_quantity

Obj = dict[str, Any]
GroupResource = tuple[str, str]  # (group, plural)
ZERO = parse_quantity(0)
_POD_NAMES = ("pods", "cpu", "memory", "ephemeral-storage")
_SERVICE_NAMES = ("services", "services.loadbalancers", "services.nodeports")
_CORE = ("secrets", "configmaps", "resourcequotas", "replicationcontrollers", "persistentvolumeclaims")


def counted_by(name: str) -> GroupResource | None:
    """The (group, plural) whose objects a quota resource name counts."""
    if name in _POD_NAMES or (name.startswith(("requests.", "limits.")) and name != "requests.storage"):
        return ("", "pods")
    if name in _SERVICE_NAMES:
        return ("", "services")
    if name in _CORE:
        return ("", name)
    if name.startswith("count/"):
        plural, _, group = name[len("count/") :].partition(".")
        return (group, plural)
    return None


def served() -> dict[GroupResource, ResourceDef]:
    return {(r.group, r.plural): r for r in catalog() if r.namespaced}


def hard_of(quota: Mapping[str, Any]) -> dict[str, str]:
    spec = quota.get("spec")
    hard = spec.get("hard") if isinstance(spec, Mapping) else None
    return {str(k): str(v) for k, v in hard.items()} if isinstance(hard, Mapping) else {}


def wanted(quotas: Iterable[Mapping[str, Any]]) -> set[GroupResource]:
    """Every served resource some quota counts."""
    known = served()
    out = set()
    for q in quotas:
        for name in hard_of(q):
            gr = counted_by(name)
            if gr is not None and gr in known:
                out.add(gr)
    return out


def used(quota: Mapping[str, Any], objects: Callable[[GroupResource], Iterable[Mapping[str, Any]]]) -> dict[str, str]:
    """`status.used` for each name in `spec.hard`, canonical quantities."""
    known = served()
    totals: dict[str, Quantity] = {}
    by_resource: dict[GroupResource, list[str]] = {}
    for name in hard_of(quota):
        totals[name] = ZERO
        gr = counted_by(name)
        if gr is not None and gr in known:
            by_resource.setdefault(gr, []).append(name)
    for gr, names in by_resource.items():
        rd = known[gr]
        for obj in objects(gr):
            if not in_scope(quota, rd, obj):
                continue
            use = usage(rd, obj)
            for name in names:
                if name in use:
                    totals[name] = totals[name] + use[name]
    return {name: canonical(q) for name, q in totals.items()}
