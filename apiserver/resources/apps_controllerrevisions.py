"""apps/v1 ControllerRevision: an immutable snapshot of a StatefulSet's or DaemonSet's template."""

from __future__ import annotations

from typing import Any

from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, dicts, text


def row(rev: Obj, now: float) -> list[Any]:
    owner = next((o for o in dicts(rev, "metadata.ownerReferences") if o.get("controller") is True), None)
    controller = "<none>"
    if owner is not None:
        group = text(owner, "apiVersion").partition("/")[0] if "/" in text(owner, "apiVersion") else ""
        controller = text(owner, "kind").lower() + (f".{group}" if group else "") + "/" + text(owner, "name")
    return [controller, rev.get("revision", 0)]


RESOURCE = stored_kind(
    group="apps",
    version="v1",
    kind="ControllerRevision",
    plural="controllerrevisions",
    namespaced=True,
    immutable=("data",),
    columns=(
        Column("Controller", description="Controller of the object"),
        Column("Revision", "integer", description="Revision indicates the revision of the state represented by Data."),
    ),
    row=row,
)
