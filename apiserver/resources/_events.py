"""What the two Event APIs share: core/v1 and events.k8s.io/v1 are one stored object (kube stores
both under `/registry/events/`), so they share a table, field selectors and checks, and convert
field by field (regarding <-> involvedObject, note <-> message, deprecated* <-> the old fields)."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.age import since
from apiserver.errors import Cause
from apiserver.resources.base import Column
from machinery.objects import Obj, get, mapping, number, text

TYPES = ("Normal", "Warning")

# events.k8s.io/v1 name -> core/v1 name
_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}


def to_core(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event as the core/v1 Event it is stored as."""
    out = {_RENAMES.get(k, k): val for k, val in event.items()}
    out["apiVersion"] = "v1"
    return out


def from_core(event: Obj) -> Obj:
    """A stored (core/v1) Event as events.k8s.io/v1 shows it."""
    back = {core: new for new, core in _RENAMES.items()}
    out = {back.get(k, k): val for k, val in event.items()}
    out["apiVersion"] = "events.k8s.io/v1"
    return out


def fields(event: Obj) -> dict[str, str]:
    """kube's Event selectable fields, read from the core/v1 shape."""
    involved = mapping(event, "involvedObject")
    out = {f"involvedObject.{f}": text(involved, f) for f in FIELD_PARTS}
    out |= {
        "reason": text(event, "reason"),
        "reportingComponent": text(event, "reportingComponent"),
        # kube: the source's component, else who reported it (events written through events.k8s.io)
        "source": text(event, "source.component") or text(event, "reportingComponent"),
        "type": text(event, "type"),
    }
    return out


FIELD_PARTS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
FIELD_SELECTORS = (
    *(f"involvedObject.{f}" for f in FIELD_PARTS),
    "reason",
    "reportingComponent",
    "source",
    "type",
)
# events.k8s.io/v1 selects by its own names (kube's field label conversion for Event)
NEW_FIELD_NAMES = {
    **{f"regarding.{f}": f"involvedObject.{f}" for f in FIELD_PARTS},
    "reason": "reason",
    "reportingController": "reportingComponent",
    "type": "type",
}


def validate_involved(event: Obj, field: str) -> list[Cause]:
    """The event's namespace must be its object's (kube: `does not match event.namespace`)."""
    causes: list[Cause] = []
    involved = v.as_dict(event.get(field), field, causes)
    ns = text(event, "metadata.namespace")
    target_ns = involved.get("namespace")
    if isinstance(target_ns, str) and target_ns and ns and target_ns != ns:
        causes.append(v.invalid(v.child(field, "namespace"), target_ns, "does not match event.namespace"))
    return causes


def row(event: Obj, now: float) -> list[Any]:
    """kubectl's event columns, from the core/v1 shape: Last Seen, Type, Reason, Object, Subobject,
    Source, Message, First Seen, Count, Name."""
    first = since(event.get("firstTimestamp"), now)
    if not event.get("firstTimestamp"):
        first = since(event.get("eventTime"), now)
    last = since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = number(event, "count")
    series = event.get("series")
    if isinstance(series, dict):
        last = since(series.get("lastObservedTime"), now)
        count = number(series, "count")
    elif count == 0:
        count = 1
    kind = text(event, "involvedObject.kind").lower()
    name = text(event, "involvedObject.name")
    target = f"{kind}/{name}" if name else kind
    component = text(event, "source.component") or text(event, "reportingComponent")
    instance = text(event, "source.host") or text(event, "reportingInstance")
    source = f"{component}, {instance}" if instance else component
    return [
        last,
        text(event, "type"),
        text(event, "reason"),
        target,
        text(event, "involvedObject.fieldPath"),
        source,
        text(event, "message").strip(),
        first,
        count,
        text(get(event, "metadata"), "name"),
    ]


COLUMNS = (
    Column("Last Seen", description="The time at which the most recent occurrence of this event was recorded."),
    Column("Type", description="Type of this event (Normal, Warning), new types could be added in the future"),
    Column(
        "Reason",
        description="This should be a short, machine understandable string that gives the reason for the transition "
        "into the object's current status.",
    ),
    Column("Object", description="The object that this event is about."),
    Column(
        "Subobject",
        priority=1,
        description="If referring to a piece of an object instead of an entire object, this string should contain "
        "a valid JSON/Go field access statement.",
    ),
    Column(
        "Source",
        priority=1,
        description="The component reporting this event. Should be a short machine understandable string.",
    ),
    Column("Message", description="A human-readable description of the status of this operation."),
    Column(
        "First Seen",
        priority=1,
        description="The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    Column("Count", priority=1, description="The number of times this event has occurred."),
    Column("Name", format="name", priority=1, description="Name must be unique within a namespace."),
)
