"""Structural validation of an object against the OpenAPI schema of its kind.

kube-apiserver refuses a body whose field has the wrong JSON type while decoding it into the Go
struct, and its validation then names the required fields left empty and the enum values it does
not support.  We have no Go types, but the published schema of every built-in kind says the same
things (types, `required`, `enum`), so a kind served from its schema alone gets these checks here,
each failure a Cause naming the field as kube's field.Path does (`spec.accessModes[0]`).
"""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.openapi_schemas import COMPONENTS, Schema, SchemaSource
from machinery.objects import Obj

# Go decoding: what a JSON value must be for each OpenAPI type
_TYPE_NAMES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}
_SKIPPED_ROOT = ("apiVersion", "kind", "metadata")  # metadata has its own rules (validate_object_meta)
_MAX_DEPTH = 64


def _is_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return v.is_int(value)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return True


class SchemaChecker:
    """Checks objects against one kind's schema; refs are resolved in `source` lazily."""

    def __init__(self, source: SchemaSource, root: str) -> None:
        self._source = source
        self._root = root

    def _resolve(self, schema: Schema) -> Schema:
        for _ in range(_MAX_DEPTH):
            ref = schema.get("$ref")
            if isinstance(ref, str) and ref.startswith(COMPONENTS):
                schema = self._source.get(ref[len(COMPONENTS) :])
                continue
            all_of = schema.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
                schema = all_of[0]
                continue
            return schema
        return schema

    def check(self, obj: Any, lenient: tuple[str, ...] = ()) -> list[Cause]:
        """Every type, required-field and enum failure of `obj`, paths from the object root.
        Below the top-level fields named in `lenient`, required fields are not checked (kube
        validates no CRD status condition's type)."""
        causes: list[Cause] = []
        root = self._resolve(self._source.get(self._root))
        if not isinstance(obj, dict):
            return [v.invalid("", obj, "must be an object")]
        props = root.get("properties") or {}
        for name, value in obj.items():
            if name in _SKIPPED_ROOT or name not in props:
                continue
            self._walk(value, props[name], name, causes, 0, required=name not in lenient)
        causes += self._missing(obj, root, "")
        return causes

    def _missing(self, value: Obj, schema: Schema, path: str, depth: int = 0) -> list[Cause]:
        """Required fields left unset.  A Go field without omitempty is `required` in the schema,
        but an unset number, bool, list or map is its zero value, which kube accepts; what kube's
        validation refuses is an unset required string, also inside an unset required struct
        (FlowSchema `spec.priorityLevelConfiguration.name`).  An empty string is left to the
        kind's own rules: the schema cannot tell "" refused (StorageClass `provisioner`) from
        "" allowed (a Condition's `message`), and Go clients always send such fields."""
        props = schema.get("properties") or {}
        causes: list[Cause] = []
        for name in schema.get("required") or ():
            if name in _SKIPPED_ROOT or value.get(name) is not None:
                continue
            sub = self._resolve(props.get(name) or {})
            here = v.child(path, name)
            if sub.get("type") == "string":
                causes.append(v.required(here))
            elif sub.get("type") == "object" and "properties" in sub and depth < _MAX_DEPTH:
                causes += self._missing({}, sub, here, depth + 1)
        return causes

    def _walk(
        self, value: Any, schema: Schema, path: str, causes: list[Cause], depth: int, *, required: bool = True
    ) -> None:
        if value is None or depth > _MAX_DEPTH:
            return  # null is "unset" for every optional field, as Go's decoder treats it
        schema = self._resolve(schema)
        one_of = schema.get("oneOf")
        if isinstance(one_of, list):
            kinds = [str(self._resolve(s).get("type")) for s in one_of if isinstance(s, dict)]
            if kinds and not any(_is_type(value, k) for k in kinds):
                causes.append(v.invalid(path, value, f"must be one of the types {', '.join(kinds)}"))
            return
        kind = schema.get("type")
        if isinstance(kind, str) and not _is_type(value, kind):
            causes.append(v.invalid(path, value, f"must be of type {_TYPE_NAMES.get(kind, kind)}"))
            return
        enum = schema.get("enum")
        if isinstance(enum, list) and enum and isinstance(value, str) and value not in enum:
            causes.append(v.not_supported(path, value, [str(e) for e in enum]))
        if isinstance(value, dict):
            self._walk_object(value, schema, path, causes, depth, required)
        elif isinstance(value, list):
            items = schema.get("items")
            if isinstance(items, dict):
                for i, item in enumerate(value):
                    self._walk(item, items, v.index(path, i), causes, depth + 1, required=required)

    def _walk_object(
        self, value: Obj, schema: Schema, path: str, causes: list[Cause], depth: int, required: bool
    ) -> None:
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for name, sub in value.items():
            if isinstance(props, dict) and name in props:
                self._walk(sub, props[name], v.child(path, name), causes, depth + 1, required=required)
            elif isinstance(extra, dict):
                self._walk(sub, extra, v.key(path, name), causes, depth + 1, required=required)
        if required:
            causes += self._missing(value, schema, path)
