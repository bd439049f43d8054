"""apps/v1 ReplicaSet: keeps a number of copies of a pod template running."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.http.subresources.scale import ScaleHandler
from apiserver.resources._podspec import default_template, validate_template
from apiserver.resources._shared import container_cells, ensure, format_label_selector, selector_string
from apiserver.resources._workload import validate_selector
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, get, mapping, number


def default(rs: Obj) -> None:
    spec = ensure(rs, "spec")
    if spec is not None:
        spec.setdefault("replicas", 1)
        default_template(rs)


def validate(rs: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(rs, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    causes += validate_selector(rs, old, "replicaset")
    causes += validate_template(rs)
    spec = mapping(rs, "spec")
    causes += v.validate_non_negative(spec.get("replicas"), "spec.replicas")
    causes += v.validate_non_negative(spec.get("minReadySeconds"), "spec.minReadySeconds")
    return causes


def fields(rs: Obj) -> dict[str, str]:
    return {"status.replicas": str(number(rs, "status.replicas"))}


def row(rs: Obj, now: float) -> list[Any]:
    names, images = container_cells(get(rs, "spec.template.spec"))
    return [
        number(rs, "spec.replicas"),
        number(rs, "status.replicas"),
        number(rs, "status.readyReplicas"),
        names,
        images,
        format_label_selector(get(rs, "spec.selector")),
    ]


def scale_selector(obj: Obj) -> str:
    return selector_string(get(obj, "spec.selector"))


RESOURCE = ResourceDef(
    group="apps",
    version="v1",
    kind="ReplicaSet",
    plural="replicasets",
    singular="replicaset",
    namespaced=True,
    empty_status={"replicas": 0},
    short_names=("rs",),
    categories=("all",),
    subresources=(
        Subresource("scale", "Scale", group="autoscaling", version="v1", handler=ScaleHandler(scale_selector)),
        Subresource("status", "ReplicaSet", handler=STATUS_VIEW),
    ),
    default=default,
    validate=validate,
    fields=fields,
    field_selectors=("status.replicas",),
    columns=(
        Column("Desired", "integer", description="Replicas is the number of desired replicas."),
        Column("Current", "integer", description="Replicas is the most recently observed number of replicas."),
        Column("Ready", "integer", description="The number of ready replicas for this replica set."),
        Column("Containers", priority=1, description="Names of each container in the template."),
        Column("Images", priority=1, description="Images referenced by each container in the template."),
        Column(
            "Selector",
            priority=1,
            description="Selector is a label query over pods that should match the replica count.",
        ),
    ),
    row=row,
)
