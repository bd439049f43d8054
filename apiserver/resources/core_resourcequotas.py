"""core/v1 ResourceQuota: per-namespace ceilings on object counts and compute, storage requests and
limits.  The quota controller fills `status.hard` and `status.used`; the ResourceQuota admission
plugin charges against them."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.age import since
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._resourcelists import canonicalize, check_quota_resource_name, quantity_cell, resource_list
from apiserver.resources.base import Column, ResourceDef, Subresource
from apiserver.table import AGE_COLUMN
from machinery.objects import Obj, get, mapping

SCOPES = (
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
)
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
# scopes that say something about a pod's lifecycle or QoS: only `Exists` makes sense for them
_EXISTS_ONLY = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "CrossNamespacePodAffinity")
_CONFLICTS = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
# which resources a scope may limit (helper.IsResourceQuotaScopeValidForResource); kube checks
# only the keys that are container resource names (cpu, memory, ephemeral-storage, hugepages-*)
_POD_COMPUTE = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
_POD_SCOPES = ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity")


def default(quota: Obj) -> None:
    for part in ("spec", "status"):
        section = quota.get(part)
        for key in ("hard", "used") if part == "status" else ("hard",):
            canonicalize(section, key)


def _scope_allows(scope: str, resource: str) -> bool:
    if scope in _POD_SCOPES:
        return resource == "pods" or resource in _POD_COMPUTE
    if scope == "BestEffort":
        return resource == "pods"
    return True


def _is_container_resource(name: str) -> bool:
    return name in ("cpu", "memory", "ephemeral-storage") or name.startswith("hugepages-")


def _validate_scopes(spec: Obj, causes: list[Cause]) -> None:
    scopes = v.as_list(spec.get("scopes"), "spec.scopes", causes)
    hard = mapping(spec, "hard")
    seen: set[str] = set()
    for scope in scopes:
        if scope not in SCOPES:
            causes.append(v.invalid("spec.scopes", scopes, "unsupported scope"))
            continue
        for resource in hard:
            if _is_container_resource(resource) and not _scope_allows(scope, resource):
                causes.append(v.invalid("spec.scopes", scopes, "unsupported scope applied to resource"))
        seen.add(scope)
    for pair in _CONFLICTS:
        if set(pair) <= seen:
            causes.append(v.invalid("spec.scopes", scopes, "conflicting scopes"))


def _validate_scope_selector(spec: Obj, causes: list[Cause]) -> None:
    field = "spec.scopeSelector.matchExpressions"
    selector = v.as_dict(spec.get("scopeSelector"), "spec.scopeSelector", causes)
    for i, expr in enumerate(v.as_list(selector.get("matchExpressions"), field, causes)):
        here = v.index(field, i)
        expr = v.as_dict(expr, here, causes)
        scope, op = expr.get("scopeName"), expr.get("operator")
        if scope not in SCOPES:
            causes.append(v.invalid(v.child(here, "scopeName"), scope, "unsupported scope"))
        causes += v.validate_enum(op, v.child(here, "operator"), SELECTOR_OPERATORS, optional=False)
        values = v.as_list(expr.get("values"), v.child(here, "values"), causes)
        if scope in _EXISTS_ONLY and op != "Exists":
            causes.append(
                v.invalid(
                    v.child(here, "operator"),
                    op,
                    "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, "
                    "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                    "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                )
            )
        if op in ("In", "NotIn") and not values:
            causes.append(
                v.required(
                    v.child(here, "values"),
                    "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                )
            )
        if op in ("Exists", "DoesNotExist") and values:
            causes.append(
                v.invalid(
                    v.child(here, "values"),
                    values,
                    "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                )
            )


def validate(quota: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(quota, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(quota.get("spec"), "spec", causes)
    resource_list(spec.get("hard"), "spec.hard", causes, name_check=check_quota_resource_name)
    _validate_scopes(spec, causes)
    _validate_scope_selector(spec, causes)
    status = v.as_dict(quota.get("status"), "status", causes)
    for key in ("hard", "used"):
        resource_list(status.get(key), f"status.{key}", causes, name_check=check_quota_resource_name)
    return causes


def row(quota: Obj, now: float) -> list[Any]:
    """kube's cells: `name: used/hard` for every resource in status.hard, sorted, the `limits.*`
    ones in Limit and the rest in Request."""
    hard, used = mapping(quota, "status.hard"), mapping(quota, "status.used")
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(hard):
        cell = f"{name}: {quantity_cell(used, name)}/{quantity_cell(hard, name)}"
        pieces = name.split(".")
        (limits if len(pieces) > 1 and pieces[0] == "limits" else requests).append(cell)
    return [since(get(quota, "metadata.creationTimestamp"), now), ", ".join(requests), ", ".join(limits)]


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="ResourceQuota",
    plural="resourcequotas",
    singular="resourcequota",
    namespaced=True,
    empty_status={},
    short_names=("quota",),
    subresources=(Subresource("status", "ResourceQuota", handler=STATUS_VIEW),),
    bumps_generation=False,
    default=default,
    validate=validate,
    columns=(
        AGE_COLUMN,
        Column(
            "Request", description="Request represents a minimum amount of cpu/memory that a container may consume."
        ),
        Column(
            "Limit",
            description="Limits control the maximum amount of cpu/memory that a container may use independent of "
            "contention on the node.",
        ),
    ),
    row=row,
    age_last=False,
)
