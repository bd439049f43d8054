"""core/v1 Event: something that happened to an object, as `kubectl describe` and `get events`
show it.  The table has no leading Name column (kubectl's event layout puts it last, wide only)."""

from __future__ import annotations

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources import _events
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj


def validate(event: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(event, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    causes += _events.validate_involved(event, "involvedObject")
    if event.get("eventTime"):
        causes += v.validate_enum(event.get("type"), "type", _events.TYPES, optional=False)
    for field in ("count",):
        causes += v.validate_non_negative(event.get(field), field)
    return causes


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="Event",
    plural="events",
    singular="event",
    namespaced=True,
    short_names=("ev",),
    bumps_generation=False,
    validate=validate,
    fields=_events.fields,
    field_selectors=_events.FIELD_SELECTORS,
    columns=_events.COLUMNS,
    row=_events.row,
    age_last=False,
    name_column=False,
)
