"""core/v1 ComponentStatus (deprecated in kube since 1.19): read-only.  kube-apiserver answers it
by probing etcd and the local components; we serve the kind (discovery, get, list) with what is
stored, which is nothing, since no client may write it."""

from __future__ import annotations

from typing import Any

from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, dicts, text


def row(cs: Obj, now: float) -> list[Any]:
    healthy = next((c for c in dicts(cs, "conditions") if text(c, "type") == "Healthy"), None)
    status = "Unknown"
    if healthy is not None:
        status = "Healthy" if text(healthy, "status") == "True" else "Unhealthy"
    return [status, text(healthy, "message") if healthy else "", text(healthy, "error") if healthy else ""]


RESOURCE = stored_kind(
    group="",
    version="v1",
    kind="ComponentStatus",
    plural="componentstatuses",
    namespaced=False,
    short_names=("cs",),
    verbs=("get", "list"),
    age_last=False,
    columns=(
        Column("Status", description="Status of the component conditions"),
        Column("Message", description="Message of the component conditions"),
        Column("Error", description="Error of the component conditions"),
    ),
    row=row,
)
