"""apps/v1 Deployment: declarative rollouts of a pod template through replicasets."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import status_view
from apiserver.http.subresources.scale import ScaleHandler
from apiserver.registry.strategy import LABELS
from apiserver.resources._podspec import default_template, validate_template
from apiserver.resources._shared import container_cells, ensure, selector_string
from apiserver.resources._workload import validate_selector
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, get, mapping, number

STRATEGIES = ("Recreate", "RollingUpdate")


def default(d: Obj) -> None:
    spec = ensure(d, "spec")
    if spec is None:
        return
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", "25%")
                rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    default_template(d)


def validate_int_or_percent(value: Any, field: str) -> list[Cause]:
    """maxSurge/maxUnavailable: a non-negative integer or a percentage such as "25%"."""
    if value is None:
        return []
    if isinstance(value, str):
        digits = value[:-1]
        if not value.endswith("%") or not digits.isdigit():
            return [
                v.invalid(
                    field,
                    value,
                    "a valid percent string must be a numeric string followed by an ending '%' "
                    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                )
            ]
        return [] if int(digits) <= 100 else [v.invalid(field, value, "must not be greater than 100%")]
    return v.validate_non_negative(value, field)


def _is_zero(value: Any) -> bool:
    return bool(value == 0 or value == "0%")


def validate(d: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(d, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    causes += validate_selector(d, old, "deployment")
    causes += validate_template(d)
    spec = mapping(d, "spec")
    causes += v.validate_non_negative(spec.get("replicas"), "spec.replicas")
    causes += v.validate_non_negative(spec.get("minReadySeconds"), "spec.minReadySeconds")
    causes += v.validate_non_negative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
    deadline = spec.get("progressDeadlineSeconds")
    causes += v.validate_non_negative(deadline, "spec.progressDeadlineSeconds")
    if v.is_int(deadline) and deadline <= number(spec, "minReadySeconds"):
        causes.append(v.invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    strategy = v.as_dict(spec.get("strategy"), "spec.strategy", causes)
    kind = strategy.get("type")
    causes += v.validate_enum(kind, "spec.strategy.type", STRATEGIES)
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate" and rolling is not None:
        causes.append(
            v.forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")
        )
    elif isinstance(rolling, dict):
        surge, unavailable = rolling.get("maxSurge"), rolling.get("maxUnavailable")
        causes += validate_int_or_percent(surge, "spec.strategy.rollingUpdate.maxSurge")
        causes += validate_int_or_percent(unavailable, "spec.strategy.rollingUpdate.maxUnavailable")
        if _is_zero(surge) and _is_zero(unavailable):
            causes.append(
                v.invalid(
                    "spec.strategy.rollingUpdate.maxUnavailable", unavailable, "may not be 0 when `maxSurge` is 0"
                )
            )
    return causes


def row(d: Obj, now: float) -> list[Any]:
    names, images = container_cells(get(d, "spec.template.spec"))
    return [
        f"{number(d, 'status.readyReplicas')}/{number(d, 'spec.replicas')}",
        number(d, "status.updatedReplicas"),
        number(d, "status.availableReplicas"),
        names,
        images,
        selector_string(get(d, "spec.selector")),
    ]


def scale_selector(obj: Obj) -> str:
    """`status.selector` of the autoscaling/v1 Scale: the label selector as text."""
    return selector_string(get(obj, "spec.selector"))


RESOURCE = ResourceDef(
    group="apps",
    version="v1",
    kind="Deployment",
    plural="deployments",
    singular="deployment",
    namespaced=True,
    empty_status={},
    short_names=("deploy",),
    categories=("all",),
    subresources=(
        Subresource("scale", "Scale", group="autoscaling", version="v1", handler=ScaleHandler(scale_selector)),
        Subresource("status", "Deployment", handler=status_view(LABELS)),
    ),
    default=default,
    validate=validate,
    columns=(
        Column("Ready", description="Number of the pod with ready state"),
        Column(
            "Up-to-date",
            description="Total number of non-terminated pods targeted by this deployment that have the desired "
            "template spec.",
        ),
        Column(
            "Available",
            description="Total number of available pods (ready for at least minReadySeconds) targeted by this "
            "deployment.",
        ),
        Column("Containers", priority=1, description="Names of each container in the template."),
        Column("Images", priority=1, description="Images referenced by each container in the template."),
        Column("Selector", priority=1, description="Label selector for pods."),
    ),
    row=row,
)
