"""storage.k8s.io/v1 CSIStorageCapacity: the capacity a CSI driver reports for a topology segment
and storage class (what the scheduler's volume binding reads)."""

from __future__ import annotations

from typing import Any

from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, text


def row(cap: Obj, now: float) -> list[Any]:
    return [text(cap, "storageClassName"), text(cap, "capacity")]


RESOURCE = stored_kind(
    group="storage.k8s.io",
    version="v1",
    kind="CSIStorageCapacity",
    plural="csistoragecapacities",
    namespaced=True,
    immutable=("storageClassName",),
    columns=(
        Column("StorageClassName", description="The storage class the capacity applies to."),
        Column("Capacity", description="The reported capacity."),
    ),
    row=row,
)
