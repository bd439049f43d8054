"""A decoded protobuf message as the JSON Go would print for the same object.

The JSON path and the protobuf path must store the same object, so this follows what
kube-apiserver does: protobuf -> Go struct -> encoding/json.  Go's rules, per field (from the
struct tags, see `schema.Field`): a non-pointer scalar is always there unless `omitempty` and
zero; a pointer is there when set, else omitted (`omitempty`) or `null`; a slice or map is
omitted when empty with `omitempty`, else `null` when empty; a non-pointer struct is always
there (omitempty never drops a struct); inline structs are flattened.  Types with their own
JSON (Time, Quantity, IntOrString, ...) are printed as Go prints them.  Unknown fields are an
error: a body we cannot fully read is refused, never silently trimmed.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from google.protobuf import unknown_fields

from apiserver import errors
from apiserver.protobuf import gotime
from apiserver.protobuf.schema import (
    DURATION,
    FIELDS_V1,
    INT_OR_STRING,
    MICRO_TIME,
    PROPS_OR_ARRAY,
    PROPS_OR_BOOL,
    QUANTITY,
    QUANTITY_VALUE,
    SCHEMA_UNIONS,
    SPECIAL,
    TIME,
    Field,
    Schema,
)
from machinery.duration import format_duration

MAX_VALUES = 1_000_000  # a few bytes of protobuf can print as many JSON keys: bound the expansion

_OMIT = object()


class _Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise errors.too_large(f"the protobuf body decodes to more than {MAX_VALUES} values")


def to_json(schema: Schema, msg: Any, *, budget: int = MAX_VALUES) -> dict[str, Any]:
    """The message as a JSON object (a dict), or a 400 naming what could not be read."""
    value = _message(schema, msg, "", _Budget(budget))
    if not isinstance(value, dict):
        raise errors.bad_request(f"a {msg.DESCRIPTOR.full_name} is not an object")
    return value


def _where(path: str) -> str:
    return f" at {path}" if path else ""


def check_unknown_fields(msg: Any, path: str) -> None:
    """400 when the message carried a field its schema does not know (or of the wrong wire type)."""
    found = unknown_fields.UnknownFieldSet(msg)
    if len(found):
        first = found[0]
        raise errors.bad_request(
            f"the protobuf body has an unknown field {first.field_number} (wire type {first.wire_type}) "
            f"in {msg.DESCRIPTOR.full_name}{_where(path)}"
        )


def _message(schema: Schema, msg: Any, path: str, budget: _Budget) -> Any:
    name = msg.DESCRIPTOR.full_name
    check_unknown_fields(msg, path)
    budget.spend()
    if name in SPECIAL:
        return _special(name, msg, path)
    if name in SCHEMA_UNIONS:
        return _schema_union(schema, name, msg, path, budget)
    info = schema.message(name)
    if info.slice_of:
        return [_scalar(v) for v in msg.items]
    out: dict[str, Any] = {}
    _fill(schema, msg, out, path, budget)
    return out


def _fill(schema: Schema, msg: Any, out: dict[str, Any], path: str, budget: _Budget) -> None:
    fields = schema.message(msg.DESCRIPTOR.full_name).fields
    for f in fields:
        if f.skip or f.inline:
            continue
        value = _field(schema, msg, f, f"{path}.{f.json}" if path else f.json, budget)
        if value is not _OMIT:
            budget.spend()
            out[f.json] = value
    # inline structs last: a field of the outer struct wins a name clash, as in encoding/json
    for f in fields:
        if f.inline:
            sub = getattr(msg, f.name)
            check_unknown_fields(sub, path)
            inner: dict[str, Any] = {}
            _fill(schema, sub, inner, path, budget)
            for key, value in inner.items():
                out.setdefault(key, value)


def _absent(f: Field) -> Any:
    return _OMIT if f.omitempty else None


def _field(schema: Schema, msg: Any, f: Field, path: str, budget: _Budget) -> Any:
    if f.is_map:
        entries = getattr(msg, f.name)
        if not len(entries):
            return _absent(f)
        budget.spend(len(entries))
        try:
            pairs = list(entries.items())
        except UnicodeDecodeError:
            # protobuf decodes a map's string keys only when they are read: a key that is not
            # UTF-8 has no JSON spelling, so the body is refused as a string field's would be
            raise errors.bad_request(f"the protobuf body's {path} has a key that is not valid UTF-8") from None
        value_desc = msg.DESCRIPTOR.fields_by_name[f.name].message_type.fields_by_name["value"]
        if value_desc.message_type is not None:
            return {k: _message(schema, v, f"{path}[{k}]", budget) for k, v in pairs}
        return {k: _scalar(v) for k, v in pairs}
    if f.repeated:
        items = getattr(msg, f.name)
        if not len(items):
            return _absent(f)
        budget.spend(len(items))
        if f.message:
            return [_message(schema, v, f"{path}[{i}]", budget) for i, v in enumerate(items)]
        return [_scalar(v) for v in items]
    present = msg.HasField(f.name)
    if f.message:
        if f.kind == "v" and not schema.message(f.message).slice_of:
            return _message(schema, getattr(msg, f.name), path, budget)
        if not present:
            return _absent(f)
        value = _message(schema, getattr(msg, f.name), path, budget)
        if f.omitempty and f.kind in "sm" and not value:
            return _OMIT
        return value
    value = getattr(msg, f.name)
    if f.kind == "v":
        if f.omitempty and not value:
            return _OMIT
        return _scalar(value)
    if not present:
        return _absent(f)
    if f.kind in "bsm" and f.omitempty and not value:
        return _OMIT
    return _scalar(value)


def _scalar(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)  # Go's encoding/json prints a float64 10 as `10`
    return value


def _schema_union(schema: Schema, name: str, msg: Any, path: str, budget: _Budget) -> Any:
    """A JSON schema's `additionalProperties`, `items` or `dependencies` value, as Go's
    MarshalJSON of these unions writes it: the schema when one is set, else the other member."""
    if msg.HasField("schema"):
        return _message(schema, msg.schema, path, budget)
    if name == PROPS_OR_BOOL:
        return msg.allows
    if name == PROPS_OR_ARRAY:
        return [_message(schema, s, f"{path}[{i}]", budget) for i, s in enumerate(msg.jSONSchemas)] or None
    return list(msg.property) or None


def _special(name: str, msg: Any, path: str) -> Any:
    if name in (TIME, MICRO_TIME):
        if not msg.HasField("seconds") and not msg.HasField("nanos"):
            return None  # Go's zero time: `null`
        if msg.seconds == gotime.GO_ZERO_SECONDS and msg.nanos == 0:
            return None
        try:
            return gotime.format_time(msg.seconds, msg.nanos, micro=name == MICRO_TIME)
        except gotime.TimeError as e:
            raise errors.bad_request(f"the protobuf body has a bad time{_where(path)}: {e}") from None
    if name == DURATION:
        return format_duration(msg.duration)
    if name in (QUANTITY, QUANTITY_VALUE):
        return msg.string if msg.string else "0"
    if name == INT_OR_STRING:
        return msg.strVal if msg.type == 1 else msg.intVal
    # RawExtension, FieldsV1 and JSON carry raw JSON bytes
    member = "Raw" if name == FIELDS_V1 else "raw"
    raw = getattr(msg, member)
    if not msg.HasField(member):
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise errors.bad_request(f"the protobuf body's {name.rsplit('.', 1)[-1]}{_where(path)} is not JSON") from None
