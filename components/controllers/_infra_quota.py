"""What a ResourceQuota's `status.used` should say, from the objects its namespace holds (pure).

The resource names and counting rules are machinery.quota's, which the apiserver's quota
admission charges by, so the controller's recount and admission's charges agree.  Which kinds
exist is machinery.resources' list of built-in namespaced resources, plus the custom ones the
controller found in discovery (`count/widgets.example.com`).  A name that counts nothing served
here (`requests.storage`, a custom resource not served, ...) is used 0, as kube reports it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from machinery.quantity import Quantity, canonical, parse_quantity
from machinery.quota import counted_by, in_scope, usage
from machinery.resources import NAMESPACED, BuiltIn, GroupResource

ZERO = parse_quantity(0)


def hard_of(quota: Mapping[str, Any]) -> dict[str, str]:
    spec = quota.get("spec")
    hard = spec.get("hard") if isinstance(spec, Mapping) else None
    return {str(k): str(v) for k, v in hard.items()} if isinstance(hard, Mapping) else {}


def wanted(quotas: Iterable[Mapping[str, Any]]) -> set[GroupResource]:
    """Every resource some quota counts that may be served: a built-in namespaced one, or any of
    a named group (a custom resource, if discovery knows it)."""
    out = set()
    for q in quotas:
        for name in hard_of(q):
            gr = counted_by(name)
            if gr is not None and (gr in NAMESPACED or gr.group):
                out.add(gr)
    return out


def used(
    quota: Mapping[str, Any],
    objects: Callable[[GroupResource], Iterable[Mapping[str, Any]]],
    served: Mapping[GroupResource, BuiltIn] = NAMESPACED,
) -> dict[str, str]:
    """`status.used` for each name in `spec.hard`, canonical quantities; `served`: the namespaced
    resources known (the built-in ones, and custom ones found in discovery)."""
    totals: dict[str, Quantity] = {}
    by_resource: dict[GroupResource, list[str]] = {}
    for name in hard_of(quota):
        totals[name] = ZERO
        gr = counted_by(name)
        if gr is not None and gr in served:
            by_resource.setdefault(gr, []).append(name)
    for gr, names in by_resource.items():
        rd = served[gr]
        for obj in objects(gr):
            if not in_scope(quota, rd, obj):
                continue
            use = usage(rd, obj)
            for name in names:
                if name in use:
                    totals[name] = totals[name] + use[name]
    return {name: canonical(q) for name, q in totals.items()}
