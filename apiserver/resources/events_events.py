"""events.k8s.io/v1 Event: the newer Event API over the same stored objects as core/v1 Event.

Stored once, under `/registry/events/`, in the core/v1 shape: the registry converts with
`to_storage` before writing and `from_storage` after reading, so both APIs see
every event (as kube-apiserver does)."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources import _events
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj


def validate(event: Obj, old: Obj | None) -> list[Cause]:
    """The rules for new-style events: who reported it, doing what, when."""
    causes = v.validate_object_meta(event, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    causes += _events.validate_involved(event, "regarding")
    for field in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        causes += v.validate_required(event, field)
    causes += v.validate_enum(event.get("type"), "type", _events.TYPES, optional=False)
    note = event.get("note")
    if isinstance(note, str) and len(note.encode()) > 1024:
        causes.append(v.too_long("note", 1024))
    return causes


def fields(event: Obj) -> dict[str, str]:
    """The events.k8s.io names of the core Event's selectable fields."""
    core = _events.fields(_events.to_core(event))
    return {new: core[old] for new, old in _events.NEW_FIELD_NAMES.items()}


def row(event: Obj, now: float) -> list[Any]:
    return _events.row(_events.to_core(event), now)


RESOURCE = ResourceDef(
    group="events.k8s.io",
    version="v1",
    kind="Event",
    plural="events",
    singular="event",
    namespaced=True,
    short_names=("ev",),
    bumps_generation=False,
    validate=validate,
    fields=fields,
    field_selectors=tuple(_events.NEW_FIELD_NAMES),
    columns=_events.COLUMNS,
    row=row,
    age_last=False,
    name_column=False,
    store_as="events",
    to_storage=_events.to_core,
    from_storage=_events.from_core,
)
