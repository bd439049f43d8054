"""A CustomResourceDefinition's schema: is it structural, does an object satisfy it, what it defaults.

apiextensions.k8s.io/v1 accepts only *structural* schemas (every node says its `type`, unless
it is `x-kubernetes-int-or-string` or keeps unknown fields; `properties` and
`additionalProperties` never together; the root is an object): `schema_problems` names each
place a schema breaks this, as kube's NonStructuralSchema condition and CRD validation do.

A custom resource is then checked against the schema of its version (`validate`: type,
required, enum, bounds, lengths, pattern, item and property counts, uniqueness, the
`allOf`/`anyOf`/`oneOf`/`not` combinators, embedded resources) and given its defaults
(`apply_defaults`: on every write and on every read from storage, so a default added later
shows on objects stored before it, as kube's structural defaulting does).  Unknown fields are
pruned by `apiserver.pruning`, which is told each custom kind's schema, so that `Strict` and
`Warn` field validation word them as for a built-in kind.

Each check yields a `Cause` with kube's field path (`spec.ports[0].name`) and kube's wording
(kube-openapi's validation errors as the apiserver reports them).  At most `MAX_CAUSES` are
reported, and the walk is bounded by `MAX_DEPTH`: a hostile schema or object costs linear time.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import orjson

from apiserver import validation as v
from apiserver.errors import Cause

Schema = Mapping[str, Any]

MAX_CAUSES = 100
MAX_DEPTH = 128
_TYPES = ("object", "array", "string", "integer", "number", "boolean")
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"
_EMBEDDED = "x-kubernetes-embedded-resource"


# -- the schema itself ------------------------------------------------------------------------


def _children(schema: Schema, path: str) -> Iterator[tuple[Schema, str]]:
    """The sub-schemas of a node that describe values below it, with their paths in the CRD."""
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for name, sub in props.items():
            if isinstance(sub, Mapping):
                yield sub, f"{path}.properties[{name}]"
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield extra, f"{path}.additionalProperties"
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield items, f"{path}.items"


def schema_problems(schema: Schema, path: str) -> list[Cause]:
    """Where `schema` (a version's openAPIV3Schema, at `path` in the CRD) is not structural."""
    causes: list[Cause] = []
    if schema.get("type") != "object":
        causes.append(
            v.required(f"{path}.type", "must be object at the root")
            if "type" not in schema
            else v.invalid(f"{path}.type", schema.get("type"), "must be object at the root")
        )
    _check_node(schema, path, causes, 0, root=True)
    return causes[:MAX_CAUSES]


def _check_node(schema: Schema, path: str, causes: list[Cause], depth: int, *, root: bool = False) -> None:
    if depth > MAX_DEPTH:
        causes.append(v.forbidden(path, f"must not be nested deeper than {MAX_DEPTH}"))
        return
    kind = schema.get("type")
    if kind is not None and kind not in _TYPES:
        causes.append(v.not_supported(f"{path}.type", kind, _TYPES))
    if kind is None and not schema.get(_INT_OR_STRING) and not schema.get(_PRESERVE):
        causes.append(v.required(f"{path}.type", "must not be empty for specified object fields"))
    if "properties" in schema and "additionalProperties" in schema:
        causes.append(
            v.forbidden(f"{path}.additionalProperties", "additionalProperties and properties are mutual exclusive")
        )
    if "items" in schema and not isinstance(schema.get("items"), Mapping):
        causes.append(v.forbidden(f"{path}.items", "items must be a schema object and not an array"))
    if kind == "array" and "items" not in schema:
        causes.append(v.required(f"{path}.items", "must be specified"))
    if schema.get(_EMBEDDED) and kind != "object":
        causes.append(v.invalid(f"{path}.type", kind, "must be object if x-kubernetes-embedded-resource is true"))
    if schema.get(_INT_OR_STRING) and kind is not None:
        causes.append(v.invalid(f"{path}.type", kind, "must be empty if x-kubernetes-int-or-string is true"))
    for member in ("properties", "additionalProperties", "items", "not"):
        found = schema.get(member)
        if found is not None and not isinstance(found, (Mapping, bool)):
            causes.append(v.invalid(f"{path}.{member}", found, "must be a schema"))
    props = schema.get("properties")
    if root and isinstance(props, Mapping):
        meta = props.get("metadata")
        if isinstance(meta, Mapping):
            extra = set(meta) - {"type", "properties", "description"}
            named = set(meta.get("properties") or {}) - {"name", "generateName"}
            if extra or named or meta.get("type") not in (None, "object"):
                causes.append(
                    v.forbidden(
                        f"{path}.properties[metadata]", "must not specify anything other than name and generateName"
                    )
                )
    for sub, at in _children(schema, path):
        if root and at == f"{path}.properties[metadata]":
            continue
        _check_node(sub, at, causes, depth + 1)
        if len(causes) >= MAX_CAUSES:
            return


# -- an object against it ---------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _has_type(value: Any, kind: str) -> bool:
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "integer":
        return v.is_int(value) or (isinstance(value, float) and value.is_integer())
    return _type_name(value) == kind


@lru_cache(maxsize=1024)
def _pattern(text: str) -> re.Pattern[str] | None:
    try:
        return re.compile(text)
    except re.error:
        return None


def validate(schema: Schema, obj: Any, path: str = "") -> list[Cause]:
    """What in `obj` breaks `schema`: its own type, and below it everything the schema says.
    At the root, apiVersion, kind and metadata are left to the caller (ObjectMeta's rules)."""
    causes: list[Cause] = []
    _validate(schema, obj, path, causes, 0, root=not path)
    return causes[:MAX_CAUSES]


def _validate(schema: Schema, value: Any, path: str, causes: list[Cause], depth: int, *, root: bool = False) -> None:
    if len(causes) >= MAX_CAUSES or depth > MAX_DEPTH:
        return
    shown = path or "<root>"
    kind = schema.get("type")
    if value is None:
        if not schema.get("nullable") and kind is not None:
            causes.append(v.invalid(shown, "null", f'{shown} in body must be of type {kind}: "null"'))
        return
    if schema.get(_INT_OR_STRING):
        if not (v.is_int(value) or isinstance(value, str)):
            causes.append(
                v.invalid(
                    shown, _type_name(value), f'{shown} in body must be of type integer,string: "{_type_name(value)}"'
                )
            )
            return
    elif isinstance(kind, str) and kind and not _has_type(value, kind):
        found = _type_name(value)
        causes.append(v.invalid(shown, found, f'{shown} in body must be of type {kind}: "{found}"'))
        return
    _value_rules(schema, value, shown, causes)
    for combinator in ("allOf", "anyOf", "oneOf"):
        subs = schema.get(combinator)
        if isinstance(subs, list):
            _combined(combinator, [s for s in subs if isinstance(s, Mapping)], value, path, shown, causes, depth)
    negated = schema.get("not")
    if isinstance(negated, Mapping) and not _satisfies(negated, value, path, depth):
        causes.append(v.invalid(shown, value, f"{shown} in body must not validate the schema (not)"))
    if isinstance(value, dict):
        _validate_object(schema, value, path, causes, depth, root)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _validate(items, item, f"{path}[{i}]", causes, depth + 1)


def _satisfies(schema: Schema, value: Any, path: str, depth: int) -> bool:
    found: list[Cause] = []
    _validate(schema, value, path, found, depth + 1)
    return not found


def _combined(
    combinator: str, subs: list[Schema], value: Any, path: str, shown: str, causes: list[Cause], depth: int
) -> None:
    passed = [s for s in subs if _satisfies(s, value, path, depth)]
    if combinator == "allOf" and len(passed) != len(subs):
        for sub in subs:
            if sub not in passed:
                _validate(sub, value, path, causes, depth + 1)
    elif combinator == "anyOf" and subs and not passed:
        causes.append(v.invalid(shown, value, f"{shown} in body must validate at least one schema (anyOf)"))
    elif combinator == "oneOf" and subs and len(passed) != 1:
        causes.append(v.invalid(shown, value, f"{shown} in body must validate one and only one schema (oneOf)"))


def _value_rules(schema: Schema, value: Any, shown: str, causes: list[Cause]) -> None:
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        causes.append(v.not_supported(shown, value, [_enum_text(e) for e in enum]))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _bounds(schema, value, shown, causes)
    if isinstance(value, str):
        length = len(value)
        most, least = schema.get("maxLength"), schema.get("minLength")
        if v.is_int(most) and length > most:
            causes.append(Cause("FieldValueTooLong", f"Too long: may not be more than {most} bytes", shown))
        if v.is_int(least) and length < least:
            causes.append(v.invalid(shown, value, f"{shown} in body should be at least {least} chars long"))
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            compiled = _pattern(pattern)
            if compiled is not None and compiled.search(value) is None:
                causes.append(v.invalid(shown, value, f"{shown} in body should match '{pattern}'"))
    if isinstance(value, list):
        most, least = schema.get("maxItems"), schema.get("minItems")
        if v.is_int(most) and len(value) > most:
            causes.append(v.too_many(shown, len(value), most))
        if v.is_int(least) and len(value) < least:
            causes.append(v.invalid(shown, len(value), f"{shown} in body should have at least {least} items"))
        if schema.get("uniqueItems") is True:
            seen: set[bytes] = set()
            for i, item in enumerate(value):
                encoded = _canonical(item)
                if encoded in seen:
                    causes.append(v.duplicate(f"{shown}[{i}]", item))
                seen.add(encoded)
    if isinstance(value, dict):
        most, least = schema.get("maxProperties"), schema.get("minProperties")
        if v.is_int(most) and len(value) > most:
            causes.append(
                Cause("FieldValueTooMany", f"Too many: {len(value)}: must have at most {most} properties", shown)
            )
        if v.is_int(least) and len(value) < least:
            causes.append(v.invalid(shown, len(value), f"{shown} in body should have at least {least} properties"))


def _enum_text(value: Any) -> str:
    return value if isinstance(value, str) else _canonical(value).decode()


def _canonical(value: Any) -> bytes:
    """Sorted-key JSON of a value; integers past 64 bits (orjson refuses them) the slow way."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _bounds(schema: Schema, value: float, shown: str, causes: list[Cause]) -> None:
    most, least = schema.get("maximum"), schema.get("minimum")
    if isinstance(most, (int, float)):
        if schema.get("exclusiveMaximum") is True and value >= most:
            causes.append(v.invalid(shown, value, f"{shown} in body should be less than {_num(most)}"))
        elif value > most:
            causes.append(v.invalid(shown, value, f"{shown} in body should be less than or equal to {_num(most)}"))
    if isinstance(least, (int, float)):
        if schema.get("exclusiveMinimum") is True and value <= least:
            causes.append(v.invalid(shown, value, f"{shown} in body should be greater than {_num(least)}"))
        elif value < least:
            causes.append(v.invalid(shown, value, f"{shown} in body should be greater than or equal to {_num(least)}"))
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and step > 0 and (value / step) != int(value / step):
        causes.append(v.invalid(shown, value, f"{shown} in body should be a multiple of {_num(step)}"))


def _num(n: float) -> str:
    return str(int(n)) if isinstance(n, float) and n.is_integer() else str(n)


def _validate_object(
    schema: Schema, value: dict[str, Any], path: str, causes: list[Cause], depth: int, root: bool
) -> None:
    required = schema.get("required")
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and value.get(name) is None and not (root and name in ("apiVersion", "kind")):
                causes.append(v.required(v.child(path, name)))
    if schema.get(_EMBEDDED):
        _validate_embedded(value, path, causes)
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    for name, sub in value.items():
        if root and name in ("apiVersion", "kind", "metadata"):
            continue
        at = v.child(path, name)
        if isinstance(props, Mapping) and isinstance(props.get(name), Mapping):
            _validate(props[name], sub, at, causes, depth + 1)
        elif isinstance(extra, Mapping):
            _validate(extra, sub, at, causes, depth + 1)


def _validate_embedded(value: dict[str, Any], path: str, causes: list[Cause]) -> None:
    """An embedded object is a resource: it names its apiVersion and kind, and its metadata is
    ObjectMeta (checked as a namespaced object's, its name optional)."""
    for name in ("apiVersion", "kind"):
        if not isinstance(value.get(name), str) or not value.get(name):
            causes.append(v.required(v.child(path, name), "must not be empty"))
    meta = value.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        causes.append(v.invalid(v.child(path, "metadata"), _type_name(meta), "must be an object"))


# -- defaults ---------------------------------------------------------------------------------


def apply_defaults(schema: Schema, obj: Any) -> None:
    """Fill in, in place, every field the schema defaults that `obj` lacks (or holds as null
    where the schema is not nullable), top-down, so a defaulted object gets its own defaults."""
    _default(schema, obj, 0)


def _default(schema: Schema, value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            for name, sub in props.items():
                if not isinstance(sub, Mapping):
                    continue
                if "default" in sub and (name not in value or (value[name] is None and not sub.get("nullable"))):
                    value[name] = copy.deepcopy(sub["default"])
                if name in value:
                    _default(sub, value[name], depth + 1)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for sub_value in value.values():
                _default(extra, sub_value, depth + 1)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for item in value:
                _default(items, item, depth + 1)


def has_defaults(schema: Schema) -> bool:
    """Whether anything in `schema` carries a default (reads need no defaulting pass otherwise)."""
    stack: list[tuple[Schema, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if "default" in node:
            return True
        if depth < MAX_DEPTH:
            stack.extend((sub, depth + 1) for sub, _ in _children(node, ""))
    return False
