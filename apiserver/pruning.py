"""Unknown fields: dropped from every object we keep, and named for `fieldValidation`.

kube-apiserver decodes a request body into its Go types, so a field the type does not have
(`foo` on a ConfigMap, `metadata.bogus`, `spec.containers[0].bogus`) is never stored: it is
dropped whatever `fieldValidation` says; `Warn` (the default) also answers one
`unknown field "<path>"` warning each, `Strict` refuses the request with 400.  We have no Go
types, so we prune against the same OpenAPI schemas (`kubernetes-validate`'s, see
`apiserver/patch/schema.py`): a struct (a schema with `properties`) keeps only its named fields;
a free-form map (`additionalProperties`: labels, annotations, ConfigMap data) keeps every key and
prunes each value against the value schema; a list prunes each item; a schema that says nothing
about its contents (`RawExtension`, `FieldsV1`, `IntOrString`, scalars,
`x-kubernetes-preserve-unknown-fields`) keeps everything under it.

The JSON schema is compiled once per kind into a tree of `_Node`s (shared between kinds through
their `$ref` names), so a request walks only the object, with one dict look-up per key: a typical
pod costs about 3x an `orjson.loads` of it (~15-20 us of CPU on a loaded 2-core machine, where the
full-schema `unknown_fields` check this replaced took ~130 us).

Duplicate keys in a JSON body (kube's `duplicate field "x"`) are named under Strict only
(`apiserver/http/duplicate_fields.py`): orjson keeps the last value, as Go's decoder does, so
what is stored is what kube stores; naming them under the default Warn too would take a second,
stdlib parse of every body (~2x the cost of pruning).

Paths are worded as kube's strict JSON decoder words them: dotted field names, `[i]` for list
items, in document order.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import orjson

from apiserver.patch import schema

MAX_REPORTED = 100
"""Unknown paths named per request: they are dropped all the same past this, only not named (a
hostile object with 100,000 bogus keys cannot grow the answer or the warnings without bound)."""


class _Node:
    """What a position's schema allows below it.

    `fields` is the named fields of a struct (None when the position is not a struct); a field
    whose schema constrains nothing maps to None.  `values` is the schema of a free-form map's
    values, `items` of a list's items; either is None when it constrains nothing.  `keys` are
    the key fields of an associative list (server-side apply names its items by them).
    `open`: a struct that also keeps the fields it does not name (a custom resource's
    `x-kubernetes-preserve-unknown-fields` beside `properties`, or such a root, whose metadata
    is still pruned as ObjectMeta).
    """

    __slots__ = ("fields", "items", "keys", "open", "values")

    def __init__(self) -> None:
        self.fields: dict[str, _Node | None] | None = None
        self.values: _Node | None = None
        self.items: _Node | None = None
        self.keys: tuple[str, ...] = ()
        self.open = False


_Defs = Mapping[str, Mapping[str, Any]]


class _Compiler:
    """Turns JSON schemas into `_Node` trees; one node per definition name, so recursive
    schemas compile to cycles and each definition is compiled once."""

    def __init__(self, defs: _Defs) -> None:
        self.defs = defs
        self.by_name: dict[str, _Node | None] = {}

    def compile(self, node: Mapping[str, Any]) -> _Node | None:
        ref = node.get("$ref")
        if isinstance(ref, str):
            # a field's own siblings of `$ref` are descriptions and patch markers, never shape
            return self._named(ref.rsplit("/", 1)[-1])
        if node.get("x-kubernetes-preserve-unknown-fields") is True:
            return None
        out = _Node()
        constrains = False
        props = node.get("properties")
        if isinstance(props, Mapping):
            out.fields = {name: self.compile(sub) if isinstance(sub, Mapping) else None for name, sub in props.items()}
            constrains = True
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            out.values = self.compile(extra)
            constrains = constrains or out.values is not None
        items = node.get("items")
        if isinstance(items, Mapping):
            out.items = self.compile(items)
            constrains = constrains or out.items is not None
            out.keys = schema.Meta(node, self.defs).list_map_keys
        return out if constrains else None

    def _named(self, name: str) -> _Node | None:
        if name in self.by_name:
            return self.by_name[name]
        target = self.defs.get(name)
        if target is None:
            self.by_name[name] = None
            return None
        # placeholder first: a schema that refers to itself (JSONSchemaProps) finds it
        placeholder = _Node()
        self.by_name[name] = placeholder
        compiled = self.compile(target)
        if compiled is None:
            self.by_name[name] = None
            return None
        placeholder.fields, placeholder.values, placeholder.items = compiled.fields, compiled.values, compiled.items
        placeholder.keys = compiled.keys
        return placeholder


@cache
def _compiler() -> _Compiler:
    defs, _ = schema.definitions()
    return _Compiler(defs)


@cache
def _root(group: str, version: str, kind: str) -> _Node | None:
    """The compiled tree of a kind, or None when no schema describes it (nothing is pruned)."""
    _, index = schema.definitions()
    name = index.get((group, version, kind))
    if name is None:
        return None
    root = _compiler().compile({"$ref": "#/$defs/" + name})
    if root is not None and root.fields is not None:
        # apiVersion and kind are type metadata every object may carry, described or not
        root.fields.setdefault("apiVersion", None)
        root.fields.setdefault("kind", None)
    return root


_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
# the kinds defined at run time (CustomResourceDefinitions), by (group, version, kind)
_custom: dict[tuple[str, str, str], _Node | None] = {}


def _compile_custom(node: Mapping[str, Any], *, resource: bool, depth: int = 0) -> _Node | None:
    """A custom resource's structural schema (inline, no `$ref`) as a tree.  A resource (the
    root, or an `x-kubernetes-embedded-resource`) always has apiVersion, kind and an ObjectMeta
    metadata, pruned as a built-in kind's are."""
    if depth > 128:
        return None
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    embedded = resource or node.get("x-kubernetes-embedded-resource") is True
    out = _Node()
    props = node.get("properties")
    if isinstance(props, Mapping) or embedded:
        named = props if isinstance(props, Mapping) else {}
        out.fields = {
            name: _compile_custom(sub, resource=False, depth=depth + 1) if isinstance(sub, Mapping) else None
            for name, sub in named.items()
        }
        if embedded:
            out.fields["apiVersion"] = None
            out.fields["kind"] = None
            out.fields["metadata"] = _compiler()._named(_OBJECT_META)
        out.open = preserve
        return out
    if preserve:
        return None
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        out.values = _compile_custom(extra, resource=False, depth=depth + 1)
        return out if out.values is not None else None
    if node.get("type") == "object" and extra is None:
        out.fields = {}  # an object that names no field keeps none (structural pruning)
        return out
    items = node.get("items")
    if isinstance(items, Mapping):
        out.items = _compile_custom(items, resource=False, depth=depth + 1)
        keys = node.get("x-kubernetes-list-map-keys")
        if node.get("x-kubernetes-list-type") == "map" and isinstance(keys, list):
            out.keys = tuple(str(k) for k in keys)
        return out if out.items is not None else None
    return None


def register_custom(group: str, version: str, kind: str, root_schema: Mapping[str, Any]) -> None:
    """Prune a custom kind's objects against its version's schema from now on."""
    _custom[(group, version, kind)] = _compile_custom(root_schema, resource=True)


def forget_custom(group: str, version: str, kind: str) -> None:
    _custom.pop((group, version, kind), None)


def prune(group: str, version: str, kind: str, obj: dict[str, Any], *, apply_paths: bool = False) -> list[str]:
    """Drop from `obj`, in place, every field the kind's schema does not have; return the paths
    of the fields dropped (at most `MAX_REPORTED` of them), in document order.

    Paths are as kube's strict decoder words them (`spec.containers[0].bogus`), or with
    `apply_paths` as server-side apply does (`.spec.containers[name="c"].bogus`)."""
    custom = (group, version, kind)
    root = _custom[custom] if custom in _custom else _root(group, version, kind)
    found: list[str] = []
    if root is not None:
        _prune(root, obj, "", found, apply_paths)
    return found


_CONTAINERS = (dict, list)


def _prune(node: _Node, value: Any, path: str, found: list[str], smd: bool) -> None:
    if isinstance(value, dict):
        fields = node.fields
        if fields is not None:
            unknown: list[str] | None = None
            for key, sub in value.items():
                if key in fields:
                    child = fields[key]
                    if child is not None and isinstance(sub, _CONTAINERS):
                        _prune(child, sub, f"{path}.{key}" if path or smd else key, found, smd)
                elif not node.open:
                    if unknown is None:
                        unknown = []
                    unknown.append(key)
                    if len(found) < MAX_REPORTED:
                        found.append(f"{path}.{key}" if path or smd else str(key))
            if unknown is not None:
                for key in unknown:
                    del value[key]
        elif node.values is not None:
            child = node.values
            for key, sub in value.items():
                if isinstance(sub, _CONTAINERS):
                    _prune(child, sub, f"{path}.{key}" if path or smd else str(key), found, smd)
    elif isinstance(value, list) and node.items is not None:
        child = node.items
        keys = node.keys if smd else ()
        for i, sub in enumerate(value):
            if isinstance(sub, _CONTAINERS):
                at = _key_element(sub, keys) if keys and isinstance(sub, dict) else f"[{i}]"
                _prune(child, sub, path + at, found, smd)


def _key_element(item: dict[str, Any], keys: tuple[str, ...]) -> str:
    """An associative list's item as structured-merge-diff names it: `[name="c"]`,
    `[containerPort=80,protocol="TCP"]`."""
    return "[" + ",".join(f"{k}={orjson.dumps(item[k]).decode()}" for k in keys if k in item) + "]"


def unknown_field_texts(paths: list[str]) -> list[str]:
    """kube's strict decoder's wording of each dropped field: `unknown field "spec.foo"`."""
    return [f'unknown field "{p}"' for p in paths]


def not_declared(paths: list[str]) -> str:
    """Server-side apply's wording (structured-merge-diff's validation errors) for `paths`."""
    errs = [f"{p}: field not declared in schema" for p in paths]
    return errs[0] if len(errs) == 1 else "\n  ".join(["errors:", *errs])
