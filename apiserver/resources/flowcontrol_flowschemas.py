"""flowcontrol.apiserver.k8s.io/v1 FlowSchema: which requests go to which priority level (API
Priority and Fairness).  Stored and shown; our apiserver does not schedule requests by them."""

from __future__ import annotations

from typing import Any

from apiserver.age import since
from apiserver.http.subresources.object_view import status_view
from apiserver.registry.strategy import OBJECT_META
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, dicts, get, text


def default(fs: Obj) -> None:
    spec = fs.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("matchingPrecedence", 1000)


def row(fs: Obj, now: float) -> list[Any]:
    method = text(fs, "spec.distinguisherMethod.type") or "<none>"
    dangling = next((c for c in dicts(fs, "status.conditions") if text(c, "type") == "Dangling"), None)
    return [
        text(fs, "spec.priorityLevelConfiguration.name"),
        get(fs, "spec.matchingPrecedence"),
        method,
        since(get(fs, "metadata.creationTimestamp"), now),
        text(dangling, "status") if dangling is not None else "?",
    ]


RESOURCE = stored_kind(
    group="flowcontrol.apiserver.k8s.io",
    version="v1",
    kind="FlowSchema",
    plural="flowschemas",
    namespaced=False,
    status={},
    status_view=status_view(*OBJECT_META),
    default=default,
    age_last=False,
    columns=(
        Column("PriorityLevel", description="The priority level requests of this schema go to."),
        Column("MatchingPrecedence", "integer", description="Lower precedence schemas are matched first."),
        Column("DistinguisherMethod", description="How requests of a schema are split into flows."),
        Column(
            "Age",
            "date",
            description="CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
        Column("MissingPL", description="Whether the priority level this schema names is missing."),
    ),
    row=row,
)
