"""core/v1 PodTemplate: a stored pod template (kube's printer shows no Age for it)."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources._podspec import default_pod_spec, validate_pod_spec
from apiserver.resources._shared import container_cells, ensure, format_labels
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get


def default(pt: Obj) -> None:
    template = ensure(pt, "template")
    pod_spec = ensure(template, "spec") if template is not None else None
    if pod_spec is not None:
        default_pod_spec(pod_spec)


def rules(pt: Obj, old: Obj | None) -> list[Cause]:
    """ValidatePodTemplate: the template's labels and its pod spec (any restart policy)."""
    causes: list[Cause] = []
    template = v.as_dict(pt.get("template"), "template", causes)
    meta = v.as_dict(template.get("metadata"), "template.metadata", causes)
    causes += v.validate_labels(meta.get("labels"), "template.metadata.labels")
    causes += validate_pod_spec(template.get("spec") or {}, "template.spec")
    return causes


def row(pt: Obj, now: float) -> list[Any]:
    names, images = container_cells(get(pt, "template.spec"))
    return [names, images, format_labels(get(pt, "template.metadata.labels"))]


RESOURCE = stored_kind(
    group="",
    version="v1",
    kind="PodTemplate",
    plural="podtemplates",
    namespaced=True,
    default=default,
    rules=rules,
    age_last=False,
    columns=(
        Column("Containers", description="Names of each container in the template."),
        Column("Images", description="Images referenced by each container in the template."),
        Column("Pod Labels", description="The labels for the pod template."),
    ),
    row=row,
)
