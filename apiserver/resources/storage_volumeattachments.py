"""storage.k8s.io/v1 VolumeAttachment: the intent to attach a volume to a node (the spec is fixed
once created; the attacher reports through /status)."""

from __future__ import annotations

from typing import Any

from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get, text


def row(va: Obj, now: float) -> list[Any]:
    return [
        text(va, "spec.attacher"),
        text(va, "spec.source.persistentVolumeName"),
        text(va, "spec.nodeName"),
        get(va, "status.attached") is True,
    ]


RESOURCE = stored_kind(
    group="storage.k8s.io",
    version="v1",
    kind="VolumeAttachment",
    plural="volumeattachments",
    namespaced=False,
    status={"attached": False},
    status_view=STATUS_VIEW,
    immutable=("spec",),
    columns=(
        Column("Attacher", description="The volume driver that attaches the volume."),
        Column("PV", description="The persistent volume to attach."),
        Column("Node", description="The node to attach the volume to."),
        Column("Attached", "boolean", description="Whether the volume is attached."),
    ),
    row=row,
)
