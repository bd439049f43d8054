"""storage.k8s.io/v1 CSINode: the CSI drivers installed on a node (named after the node)."""

from __future__ import annotations

from typing import Any

from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, dicts


def row(node: Obj, now: float) -> list[Any]:
    return [len(dicts(node, "spec.drivers"))]


RESOURCE = stored_kind(
    group="storage.k8s.io",
    version="v1",
    kind="CSINode",
    plural="csinodes",
    namespaced=False,
    columns=(
        Column("Drivers", "integer", description="Drivers indicates the number of CSI drivers registered on the node"),
    ),
    row=row,
)
