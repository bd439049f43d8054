"""ResourceLists (`{"cpu": "500m", "memory": "1Gi"}`) as quota, limit ranges and pods hold them:
resource names checked as kube checks them, quantities parsed and stored in canonical form (kube
decodes and re-encodes them, so `0.5` comes back as `500m`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from machinery.objects import Obj
from machinery.quantity import Quantity, QuantityError, canonical, parse_quantity

# the names a quota may count without a domain prefix (helper.IsStandardQuotaResourceName)
STANDARD_QUOTA_RESOURCES = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
# counted in whole objects: fractions are refused (helper.IsIntegerResourceName)
INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
NOT_QUOTA_RESOURCE = "must be a standard resource for quota"
NOT_CONTAINER_RESOURCE = "must be a standard resource type or fully qualified"

NameCheck = Callable[[str, str], list[Cause]]  # (name, field) -> causes


def _is_hugepages(name: str) -> bool:
    return name.startswith(("hugepages-", "requests.hugepages-"))


def check_resource_name(name: str, field: str) -> list[Cause]:
    """validateResourceName: a qualified name."""
    return [v.invalid(field, name, m) for m in v.is_qualified_name(name)]


def check_quota_resource_name(name: str, field: str) -> list[Cause]:
    causes = check_resource_name(name, field)
    if "/" not in name and name not in STANDARD_QUOTA_RESOURCES and not _is_hugepages(name):
        causes.append(v.invalid(field, name, NOT_QUOTA_RESOURCE))
    return causes


def check_container_resource_name(name: str, field: str) -> list[Cause]:
    """validateContainerResourceName: cpu, memory, ephemeral-storage, hugepages-*, or domain/name."""
    causes = check_resource_name(name, field)
    if "/" not in name and name not in STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
        causes.append(v.invalid(field, name, NOT_CONTAINER_RESOURCE))
    return causes


def is_integer_resource(name: str) -> bool:
    return name in INTEGER_RESOURCES or name.startswith("count/")


def resource_list(
    value: Any, field: str, causes: list[Cause], *, name_check: NameCheck = check_resource_name
) -> dict[str, Quantity]:
    """The parsed list; a cause per bad name, unparsable or negative quantity."""
    parsed: dict[str, Quantity] = {}
    for name, raw in v.as_dict(value, field, causes).items():
        here = v.key(field, name)
        causes += name_check(name, here)
        try:
            q = parse_quantity(raw)
        except QuantityError as err:
            causes.append(v.invalid(here, raw, str(err)))
            continue
        if q.value < 0:
            causes.append(v.invalid(here, canonical(q), "must be greater than or equal to 0"))
        elif is_integer_resource(name) and q.value.denominator != 1:
            causes.append(v.invalid(here, canonical(q), "must be an integer"))
        parsed[name] = q
    return parsed


def canonicalize(obj: Any, key: str) -> None:
    """`obj[key]`, a ResourceList, with every parsable quantity in canonical form (in place)."""
    if not isinstance(obj, dict):
        return
    values = obj.get(key)
    if not isinstance(values, dict):
        return
    for name, raw in list(values.items()):
        try:
            values[name] = canonical(parse_quantity(raw))
        except QuantityError:
            continue


def quantity_cell(values: Obj, name: str) -> str:
    """A quantity as a Table shows it: canonical, `0` when absent (a zero Quantity's String())."""
    raw = values.get(name)
    if raw is None:
        return "0"
    try:
        return canonical(parse_quantity(raw))
    except QuantityError:
        return str(raw)
