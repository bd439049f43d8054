"""Server-side printing: a list of objects as the `meta.k8s.io/v1` Table that `kubectl get` shows.

Every human-readable `kubectl get` asks for a Table; the server computes the cells (Age included,
so the clock is an argument) and kubectl only lays them out.  Each row carries `object`: a
PartialObjectMetadata by default (kubectl takes the NAMESPACE column, `--show-labels` and `-L`
from it), the full object for `includeObject=Object` (`--sort-by` needs it), nothing for `None`.
As kube-apiserver does, the `-o wide` cells are always sent; kubectl hides priority-1 columns.
"""

from __future__ import annotations

from typing import Any

from apiserver.age import since
from apiserver.errors import bad_request
from apiserver.resources.base import Column, ResourceDef
from machinery.objects import Obj, metadata

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources "
    "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
    "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this value. "
    "It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. "
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
NAME_COLUMN = Column("Name", "string", "name", NAME_DESCRIPTION)
AGE_COLUMN = Column("Age", "string", "", AGE_DESCRIPTION)

INCLUDE_OBJECT = ("Metadata", "None", "Object")


def _age_at(resource: ResourceDef) -> int:
    """Where Age goes among the resource's own columns: after the last priority-0 one."""
    for i, col in enumerate(resource.columns):
        if col.priority > 0:
            return i
    return len(resource.columns)


def columns(resource: ResourceDef) -> list[Column]:
    """The kind's columns in kubectl's order, Name and Age included."""
    cols = list(resource.columns)
    if resource.age_last:
        cols.insert(_age_at(resource), AGE_COLUMN)
    if resource.name_column:
        cols.insert(0, NAME_COLUMN)
    return cols


def cells(resource: ResourceDef, obj: Obj, now: float) -> list[Any]:
    """One row's cells, aligned with `columns(resource)`.  A stored object the row function cannot
    read (it should not happen: stored objects were validated) shows `<unknown>` cells, never a 500."""
    meta = metadata(obj)
    width = len(resource.columns)
    try:
        own = list(resource.row(obj, now)) if resource.row is not None else []
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        own = ["<unknown>"] * width
    own = (own + ["<unknown>"] * width)[:width]
    if resource.age_last:
        own.insert(_age_at(resource), since(meta.get("creationTimestamp"), now))
    if resource.name_column:
        own.insert(0, meta.get("name", ""))
    return own


def partial_object_metadata(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata(obj)}


def row(resource: ResourceDef, obj: Obj, *, now: float, include_object: str = "Metadata") -> Obj:
    result: Obj = {"cells": cells(resource, obj, now)}
    conditions = resource.row_conditions
    if conditions is not None:
        found = conditions(obj)
        if found:
            result["conditions"] = found
    if include_object == "Metadata":
        result["object"] = partial_object_metadata(obj)
    elif include_object == "Object":
        result["object"] = obj
    return result


def table(
    resource: ResourceDef,
    objects: list[dict[str, Any]],
    *,
    now: float,
    include_object: str = "Metadata",
    resource_version: str = "",
    continue_token: str = "",
    remaining: int | None = None,
) -> dict[str, Any]:
    """The Table for a list (or a one-item list for a single GET or one watch event).

    `resource_version` must be set for lists: without it `kubectl get -w` watches from "now" and
    prints every row twice.  An unknown `includeObject` is a 400, as kube-apiserver answers.
    """
    if include_object not in INCLUDE_OBJECT:
        raise bad_request(
            f'Unsupported value: "{include_object}": supported values for includeObject: '
            + ", ".join(f'"{v}"' for v in INCLUDE_OBJECT)
        )
    metadata: dict[str, Any] = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    if remaining is not None:
        metadata["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [c.to_dict() for c in columns(resource)],
        "rows": [row(resource, o, now=now, include_object=include_object) for o in objects],
    }
