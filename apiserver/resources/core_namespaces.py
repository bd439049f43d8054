"""core/v1 Namespace: the scope of every namespaced object; `Active` until it is deleted.

A DELETE marks it Terminating and keeps it while `spec.finalizers` holds `kubernetes`: the
namespace controller (components/controllers/namespace.py) empties it, removes that finalizer
through `/finalize` and deletes it again.  Without a running controller-manager, `kubectl delete
namespace` leaves the namespace Terminating, as a kube cluster whose controller manager is down does."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import FINALIZE_VIEW, STATUS_VIEW
from apiserver.resources._shared import ensure
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, get, text

NAME_LABEL = "kubernetes.io/metadata.name"


def default(ns: Obj) -> None:
    meta = ensure(ns, "metadata")
    name = meta.get("name") if meta is not None else None
    if meta is not None and isinstance(name, str) and name:
        labels = meta.get("labels")
        if labels is None:
            labels = meta["labels"] = {}
        if isinstance(labels, dict):
            labels[NAME_LABEL] = name  # always the name, as kube sets it on every write
    spec = ensure(ns, "spec")
    if spec is not None:
        spec.setdefault("finalizers", ["kubernetes"])
    status = ensure(ns, "status")
    if status is not None:
        status.setdefault("phase", "Active")


def validate(ns: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(ns, namespaced=False, name_fn=v.name_is_dns_label, old=old)
    spec = v.as_dict(ns.get("spec"), "spec", causes)
    for i, fin in enumerate(v.as_list(spec.get("finalizers"), "spec.finalizers", causes)):
        here = v.index("spec.finalizers", i)
        if not isinstance(fin, str):
            causes.append(v.invalid(here, fin, "must be a string"))
        elif "/" in fin or fin != "kubernetes":
            causes += [v.invalid(here, fin, m) for m in v.is_qualified_name(fin)]
    causes += v.validate_enum(get(ns, "status.phase"), "status.phase", ("Active", "Terminating"))
    return causes


def fields(ns: Obj) -> dict[str, str]:
    return {"status.phase": text(ns, "status.phase")}


def row(ns: Obj, now: float) -> list[Any]:
    return [text(ns, "status.phase")]


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="Namespace",
    plural="namespaces",
    singular="namespace",
    namespaced=False,
    empty_status={},
    short_names=("ns",),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    subresources=(
        Subresource("finalize", "Namespace", verbs=("update",), handler=FINALIZE_VIEW),
        Subresource("status", "Namespace", handler=STATUS_VIEW),
    ),
    bumps_generation=False,
    default=default,
    validate=validate,
    fields=fields,
    field_selectors=("status.phase",),
    columns=(Column("Status", description="The status of the namespace"),),
    row=row,
    spec_finalizers=True,
)
