"""apps/v1 DaemonSet: one copy of a pod template on every eligible node."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._podspec import default_template, validate_template
from apiserver.resources._shared import container_cells, ensure, format_label_selector, format_labels
from apiserver.resources._stored import stored_kind
from apiserver.resources._workload import validate_selector
from apiserver.resources.base import Column
from machinery.objects import Obj, get, mapping, number

UPDATE_STRATEGIES = ("RollingUpdate", "OnDelete")


def default(ds: Obj) -> None:
    """apps/v1 SetDefaults_DaemonSet."""
    spec = ensure(ds, "spec")
    if spec is None:
        return
    spec.setdefault("revisionHistoryLimit", 10)
    strategy = ensure(spec, "updateStrategy")
    if strategy is not None:
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = ensure(strategy, "rollingUpdate")
            if rolling is not None:
                rolling.setdefault("maxUnavailable", 1)
                rolling.setdefault("maxSurge", 0)
    default_template(ds)


def rules(ds: Obj, old: Obj | None) -> list[Cause]:
    causes = validate_selector(ds, old, "daemonset")
    causes += validate_template(ds)
    spec = mapping(ds, "spec")
    causes += v.validate_non_negative(spec.get("minReadySeconds"), "spec.minReadySeconds")
    causes += v.validate_enum(get(ds, "spec.updateStrategy.type"), "spec.updateStrategy.type", UPDATE_STRATEGIES)
    return causes


def row(ds: Obj, now: float) -> list[Any]:
    names, images = container_cells(get(ds, "spec.template.spec"))
    return [
        number(ds, "status.desiredNumberScheduled"),
        number(ds, "status.currentNumberScheduled"),
        number(ds, "status.numberReady"),
        number(ds, "status.updatedNumberScheduled"),
        number(ds, "status.numberAvailable"),
        format_labels(get(ds, "spec.template.spec.nodeSelector")),
        names,
        images,
        format_label_selector(get(ds, "spec.selector")),
    ]


RESOURCE = stored_kind(
    group="apps",
    version="v1",
    kind="DaemonSet",
    plural="daemonsets",
    namespaced=True,
    short_names=("ds",),
    categories=("all",),
    status={"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0},
    status_view=STATUS_VIEW,
    default=default,
    rules=rules,
    columns=(
        Column("Desired", "integer", description="The total number of nodes that should be running the daemon pod"),
        Column("Current", "integer", description="The number of nodes that are running at least 1 daemon pod"),
        Column(
            "Ready",
            "integer",
            description=(
                "The number of nodes that should be running the daemon pod and have one or more running and ready"
            ),
        ),
        Column("Up-to-date", "integer", description="The total number of nodes that are running updated daemon pod"),
        Column(
            "Available",
            "integer",
            description="The number of nodes that should be running the daemon pod and have one or more available",
        ),
        Column(
            "Node Selector", description="NodeSelector is a selector which must be true for the pod to fit on a node."
        ),
        Column("Containers", priority=1, description="Names of each container in the template."),
        Column("Images", priority=1, description="Images referenced by each container in the template."),
        Column("Selector", priority=1, description="A label query over pods that are managed by the daemon set."),
    ),
    row=row,
)
