"""A JSON object as the protobuf message Go would send for it, or NotRepresentable.

Used for responses: we answer protobuf only when every key and value has an exact home in
the message (a Go client then decodes the same struct it would from our JSON), so this is
strict where the decoder is forgiving: an unknown key, a value of the wrong JSON type, an
int out of range, a time that does not parse, all raise `NotRepresentable` and the caller
answers JSON instead.  `null` and absent are the same to Go, so `null` sets nothing.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from apiserver.protobuf import gotime
from apiserver.protobuf.schema import (
    DURATION,
    FIELDS_V1,
    INT_OR_STRING,
    JSON_VALUE,
    MICRO_TIME,
    PROPS_OR_ARRAY,
    PROPS_OR_BOOL,
    PROPS_OR_STRINGS,
    QUANTITY,
    QUANTITY_VALUE,
    RAW_EXTENSION,
    SCHEMA_UNIONS,
    SPECIAL,
    TIME,
    Field,
    Schema,
)
from machinery.duration import DurationError, parse_duration

_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


class NotRepresentable(Exception):
    """The JSON has something the protobuf message cannot carry exactly."""


def fill(schema: Schema, msg: Any, value: Any, path: str = "", *, top: bool = True) -> None:
    """Set `msg` from the JSON object `value` (apiVersion/kind are the envelope's at the top)."""
    name = msg.DESCRIPTOR.full_name
    if name in SPECIAL:
        _special(name, msg, value, path)
        return
    if name in SCHEMA_UNIONS:
        _schema_union(schema, name, msg, value, path)
        return
    info = schema.message(name)
    if info.slice_of:
        if not isinstance(value, list):
            raise NotRepresentable(f"{path}: not an array")
        _repeated_scalars(msg, msg.DESCRIPTOR.fields_by_name["items"], "items", value, path)
        return
    if not isinstance(value, dict):
        raise NotRepresentable(f"{path}: not an object")
    keys = schema.by_json(name)
    for key, item in value.items():
        chain = keys.get(key)
        if chain is None:
            if (info.typemeta or top) and key in ("apiVersion", "kind"):
                continue
            raise NotRepresentable(f"{path}.{key}: no such field in {name}")
        if item is None:
            continue
        target = msg
        for inline in chain[:-1]:
            target = getattr(target, inline.name)
        _set(schema, target, chain[-1], item, f"{path}.{key}")


def _set(schema: Schema, msg: Any, f: Field, value: Any, path: str) -> None:
    fd = msg.DESCRIPTOR.fields_by_name[f.name]
    if f.is_map:
        if not isinstance(value, dict):
            raise NotRepresentable(f"{path}: not an object")
        entries = getattr(msg, f.name)
        key_fd = fd.message_type.fields_by_name["key"]
        value_fd = fd.message_type.fields_by_name["value"]
        for k, v in value.items():
            key = _scalar(key_fd, k, path)
            if v is None:
                raise NotRepresentable(f"{path}[{k}]: null in a map")
            if value_fd.message_type is not None:
                fill(schema, entries[key], v, f"{path}[{k}]", top=False)
            else:
                entries[key] = _scalar(value_fd, v, path)
        return
    if f.repeated:
        if not isinstance(value, list):
            raise NotRepresentable(f"{path}: not an array")
        if f.message:
            items = getattr(msg, f.name)
            for i, v in enumerate(value):
                if v is None and f.message != JSON_VALUE:  # a JSON value may be null (an enum's)
                    raise NotRepresentable(f"{path}[{i}]: null in an array of objects")
                fill(schema, items.add(), v, f"{path}[{i}]", top=False)
        else:
            _repeated_scalars(msg, fd, f.name, value, path)
        return
    if f.message:
        sub = getattr(msg, f.name)
        sub.SetInParent()
        fill(schema, sub, value, path, top=False)
        return
    setattr(msg, f.name, _scalar(fd, value, path))


def _repeated_scalars(msg: Any, fd: Any, name: str, value: list[Any], path: str) -> None:
    items = getattr(msg, name)
    for v in value:
        items.append(_scalar(fd, v, path))


def _scalar(fd: Any, value: Any, path: str) -> Any:
    kind = fd.type
    if kind == fd.TYPE_STRING:
        if not isinstance(value, str):
            raise NotRepresentable(f"{path}: not a string")
        return value
    if kind == fd.TYPE_BOOL:
        if not isinstance(value, bool):
            raise NotRepresentable(f"{path}: not a boolean")
        return value
    if kind == fd.TYPE_BYTES:
        if not isinstance(value, str):
            raise NotRepresentable(f"{path}: not a base64 string")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise NotRepresentable(f"{path}: not base64") from None
    if kind in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NotRepresentable(f"{path}: not a number")
        return float(value)
    names = {fd.TYPE_INT32: "int32", fd.TYPE_INT64: "int64", fd.TYPE_UINT32: "uint32", fd.TYPE_UINT64: "uint64"}
    if kind not in names:
        raise NotRepresentable(f"{path}: unsupported field type {kind}")
    low, high = _RANGES[names[kind]]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise NotRepresentable(f"{path}: not an {names[kind]}")
    return value


def _schema_union(schema: Schema, name: str, msg: Any, value: Any, path: str) -> None:
    """A JSON schema's union member from its JSON (Go's UnmarshalJSON of these types)."""
    if isinstance(value, dict):
        fill(schema, msg.schema, value, path, top=False)
        if name == PROPS_OR_BOOL:
            msg.allows = True
    elif name == PROPS_OR_BOOL and isinstance(value, bool):
        msg.allows = value
    elif name == PROPS_OR_ARRAY and isinstance(value, list):
        for i, item in enumerate(value):
            fill(schema, msg.jSONSchemas.add(), item, f"{path}[{i}]", top=False)
    elif name == PROPS_OR_STRINGS and isinstance(value, list) and all(isinstance(x, str) for x in value):
        msg.property.extend(value)
    else:
        raise NotRepresentable(f"{path}: not a schema")


def _special(name: str, msg: Any, value: Any, path: str) -> None:
    if name in (TIME, MICRO_TIME):
        if not isinstance(value, str):
            raise NotRepresentable(f"{path}: a time is a string")
        try:
            msg.seconds, msg.nanos = gotime.parse_time(value)
        except gotime.TimeError as e:
            raise NotRepresentable(f"{path}: {e}") from None
    elif name == DURATION:
        if not isinstance(value, str):
            raise NotRepresentable(f"{path}: a duration is a string")
        try:
            msg.duration = parse_duration(value)
        except DurationError as e:
            raise NotRepresentable(f"{path}: {e}") from None
    elif name in (QUANTITY, QUANTITY_VALUE):
        # Go parses a Quantity from a JSON string or number alike: the number's text is the same input
        if isinstance(value, str):
            msg.string = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            msg.string = orjson.dumps(value).decode()
        else:
            raise NotRepresentable(f"{path}: a quantity is a string or a number")
    elif name == INT_OR_STRING:
        if isinstance(value, str):
            msg.type, msg.strVal = 1, value
        elif isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31:
            msg.type, msg.intVal = 0, value
        else:
            raise NotRepresentable(f"{path}: an int-or-string is an int32 or a string")
    elif name == RAW_EXTENSION:
        msg.raw = orjson.dumps(value)
    elif name == FIELDS_V1:
        msg.Raw = orjson.dumps(value)
    elif name == JSON_VALUE:
        msg.raw = orjson.dumps(value)
    else:  # pragma: no cover - SPECIAL is the list above
        raise NotRepresentable(f"{path}: {name}")
