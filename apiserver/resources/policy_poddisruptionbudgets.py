"""policy/v1 PodDisruptionBudget: how many of the pods a selector picks must stay up (or may be
down) during voluntary disruptions such as drains; eviction consults it through `status`."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._workload import validate_label_selector
from apiserver.resources.apps_deployments import validate_int_or_percent
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, get, number

EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")
STATUS_COUNTS = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods", "observedGeneration")


def validate(pdb: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(pdb, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(pdb.get("spec"), "spec", causes)
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        causes.append(v.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    for field in ("minAvailable", "maxUnavailable"):
        causes += validate_int_or_percent(spec.get(field), f"spec.{field}")
    if spec.get("selector") is not None:
        causes += validate_label_selector(spec.get("selector"), "spec.selector")
    causes += v.validate_enum(
        spec.get("unhealthyPodEvictionPolicy"), "spec.unhealthyPodEvictionPolicy", EVICTION_POLICIES
    )
    status = v.as_dict(pdb.get("status"), "status", causes)
    for field in STATUS_COUNTS:
        causes += v.validate_non_negative(status.get(field), f"status.{field}")
    return causes


def _int_or_string(value: Any) -> str:
    """IntOrString.String(), or N/A when unset."""
    if v.is_int(value) or isinstance(value, str):
        return str(value)
    return "N/A"


def row(pdb: Obj, now: float) -> list[Any]:
    return [
        _int_or_string(get(pdb, "spec.minAvailable")),
        _int_or_string(get(pdb, "spec.maxUnavailable")),
        number(pdb, "status.disruptionsAllowed"),
    ]


RESOURCE = ResourceDef(
    group="policy",
    version="v1",
    kind="PodDisruptionBudget",
    plural="poddisruptionbudgets",
    singular="poddisruptionbudget",
    namespaced=True,
    empty_status={"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
    short_names=("pdb",),
    subresources=(Subresource("status", "PodDisruptionBudget", handler=STATUS_VIEW),),
    validate=validate,
    columns=(
        Column("Min Available", description="The minimum number of pods that must be available."),
        Column("Max Unavailable", description="The maximum number of pods that may be unavailable."),
        Column(
            "Allowed Disruptions",
            type="integer",
            description="Calculated number of pods that may be disrupted at this time.",
        ),
    ),
    row=row,
)
