"""apps/v1 StatefulSet: pods with stable identities and storage, created and updated in order."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._podspec import default_template, validate_template
from apiserver.resources._shared import container_cells, ensure
from apiserver.resources._stored import scale_selector, stored_kind
from apiserver.resources._workload import validate_selector
from apiserver.resources.base import Column
from machinery.objects import Obj, get, mapping, number

POD_MANAGEMENT = ("OrderedReady", "Parallel")
UPDATE_STRATEGIES = ("RollingUpdate", "OnDelete")
PVC_POLICIES = ("Retain", "Delete")


def default(sts: Obj) -> None:
    """apps/v1 SetDefaults_StatefulSet."""
    spec = ensure(sts, "spec")
    if spec is None:
        return
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("revisionHistoryLimit", 10)
    strategy = ensure(spec, "updateStrategy")
    if strategy is not None:
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = ensure(strategy, "rollingUpdate")
            if rolling is not None:
                rolling.setdefault("partition", 0)
    retention = ensure(spec, "persistentVolumeClaimRetentionPolicy")
    if retention is not None:
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
    default_template(sts)


def rules(sts: Obj, old: Obj | None) -> list[Cause]:
    causes = validate_selector(sts, old, "statefulset")
    causes += validate_template(sts)
    spec = mapping(sts, "spec")
    causes += v.validate_non_negative(spec.get("replicas"), "spec.replicas")
    causes += v.validate_non_negative(spec.get("minReadySeconds"), "spec.minReadySeconds")
    causes += v.validate_enum(spec.get("podManagementPolicy"), "spec.podManagementPolicy", POD_MANAGEMENT)
    causes += v.validate_enum(get(sts, "spec.updateStrategy.type"), "spec.updateStrategy.type", UPDATE_STRATEGIES)
    causes += v.validate_non_negative(
        get(sts, "spec.updateStrategy.rollingUpdate.partition"), "spec.updateStrategy.rollingUpdate.partition"
    )
    for f in ("whenDeleted", "whenScaled"):
        here = f"spec.persistentVolumeClaimRetentionPolicy.{f}"
        causes += v.validate_enum(get(sts, here), here, PVC_POLICIES)
    if old is not None:
        for f in ("serviceName", "podManagementPolicy", "volumeClaimTemplates"):
            causes += v.validate_immutable(sts, old, f"spec.{f}")
    return causes


def row(sts: Obj, now: float) -> list[Any]:
    names, images = container_cells(get(sts, "spec.template.spec"))
    return [f"{number(sts, 'status.readyReplicas')}/{number(sts, 'spec.replicas')}", names, images]


RESOURCE = stored_kind(
    group="apps",
    version="v1",
    kind="StatefulSet",
    plural="statefulsets",
    namespaced=True,
    short_names=("sts",),
    categories=("all",),
    status={"replicas": 0, "availableReplicas": 0},
    status_view=STATUS_VIEW,
    scale=scale_selector,
    default=default,
    rules=rules,
    columns=(
        Column("Ready", description="Number of the pod with ready state"),
        Column("Containers", priority=1, description="Names of each container in the template."),
        Column("Images", priority=1, description="Images referenced by each container in the template."),
    ),
    row=row,
)
