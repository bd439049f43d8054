"""core/v1 ReplicationController: the ReplicaSet's predecessor, a number of copies of a pod
template selected by an equality-based selector (kube-controller-manager still runs it)."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._podspec import default_template, validate_template
from apiserver.resources._shared import container_cells, ensure, format_labels
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get, number


def default(rc: Obj) -> None:
    """pkg/apis/core/v1 SetDefaults_ReplicationController: the selector and labels default to the
    template's labels, replicas to 1."""
    spec = ensure(rc, "spec")
    if spec is None:
        return
    labels = get(rc, "spec.template.metadata.labels")
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = ensure(rc, "metadata")
        if meta is not None and not meta.get("labels"):
            meta["labels"] = dict(labels)
    spec.setdefault("replicas", 1)
    default_template(rc)


def rules(rc: Obj, old: Obj | None) -> list[Cause]:
    causes = validate_template(rc)
    causes += v.validate_non_negative(get(rc, "spec.replicas"), "spec.replicas")
    causes += v.validate_non_negative(get(rc, "spec.minReadySeconds"), "spec.minReadySeconds")
    return causes


def row(rc: Obj, now: float) -> list[Any]:
    names, images = container_cells(get(rc, "spec.template.spec"))
    return [
        number(rc, "spec.replicas"),
        number(rc, "status.replicas"),
        number(rc, "status.readyReplicas"),
        names,
        images,
        format_labels(get(rc, "spec.selector")),
    ]


def scale_selector(rc: Obj) -> str:
    selector = get(rc, "spec.selector")
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) if isinstance(selector, dict) else ""


RESOURCE = stored_kind(
    group="",
    version="v1",
    kind="ReplicationController",
    plural="replicationcontrollers",
    namespaced=True,
    short_names=("rc",),
    categories=("all",),
    status={"replicas": 0},
    status_view=STATUS_VIEW,
    scale=scale_selector,
    default=default,
    rules=rules,
    columns=(
        Column("Desired", "integer", description="Number of desired pods."),
        Column("Current", "integer", description="Number of actual pods."),
        Column("Ready", "integer", description="The number of ready replicas for this replication controller."),
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
