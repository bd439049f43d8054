"""core/v1 PersistentVolumeClaim: a user's request for storage, bound to one volume."""

from __future__ import annotations

from typing import Any

from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._storage import access_modes, default_volume
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get, text


def row(pvc: Obj, now: float) -> list[Any]:
    bound = text(pvc, "status.phase") == "Bound"
    return [
        text(pvc, "status.phase"),
        text(pvc, "spec.volumeName"),
        text(pvc, "status.capacity.storage") if bound else "",
        access_modes(get(pvc, "status.accessModes")) if bound else "",
        text(pvc, "spec.storageClassName"),
        text(pvc, "spec.volumeAttributesClassName") or "<unset>",
        text(pvc, "spec.volumeMode"),
    ]


RESOURCE = stored_kind(
    group="",
    version="v1",
    kind="PersistentVolumeClaim",
    plural="persistentvolumeclaims",
    namespaced=True,
    short_names=("pvc",),
    status={},
    status_view=STATUS_VIEW,
    default=default_volume,
    columns=(
        Column("Status", description="The phase of the claim."),
        Column("Volume", description="The volume bound to the claim."),
        Column("Capacity", description="The capacity of the bound volume."),
        Column("Access Modes", description="The ways the bound volume can be mounted."),
        Column("StorageClass", description="The storage class of the claim."),
        Column("VolumeAttributesClass", description="The volume attributes class of the claim."),
        Column("VolumeMode", priority=1, description="Whether the volume is a filesystem or a raw block device."),
    ),
    row=row,
)
