"""core/v1 PersistentVolume: a piece of storage in the cluster, bound to at most one claim."""

from __future__ import annotations

from typing import Any

from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._shared import ensure
from apiserver.resources._storage import access_modes, default_volume
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get, text


def default(pv: Obj) -> None:
    default_volume(pv)
    spec = ensure(pv, "spec")
    if spec is not None:
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")


def row(pv: Obj, now: float) -> list[Any]:
    claim = get(pv, "spec.claimRef")
    claimed = f"{text(claim, 'namespace')}/{text(claim, 'name')}" if isinstance(claim, dict) else ""
    return [
        text(pv, "spec.capacity.storage") or "0",
        access_modes(get(pv, "spec.accessModes")),
        text(pv, "spec.persistentVolumeReclaimPolicy"),
        text(pv, "status.phase"),
        claimed,
        text(pv, "spec.storageClassName"),
        text(pv, "spec.volumeAttributesClassName") or "<unset>",
        text(pv, "status.reason"),
        text(pv, "spec.volumeMode"),
    ]


RESOURCE = stored_kind(
    group="",
    version="v1",
    kind="PersistentVolume",
    plural="persistentvolumes",
    namespaced=False,
    short_names=("pv",),
    status={},
    status_view=STATUS_VIEW,
    default=default,
    columns=(
        Column("Capacity", description="The storage capacity of the volume."),
        Column("Access Modes", description="The ways the volume can be mounted."),
        Column("Reclaim Policy", description="What happens to the volume when released from its claim."),
        Column("Status", description="The phase of the volume."),
        Column("Claim", description="The claim bound to the volume."),
        Column("StorageClass", description="The storage class of the volume."),
        Column("VolumeAttributesClass", description="The volume attributes class of the volume."),
        Column("Reason", description="The reason the volume is in its phase."),
        Column("VolumeMode", priority=1, description="Whether the volume is a filesystem or a raw block device."),
    ),
    row=row,
)
