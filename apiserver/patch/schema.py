"""Patch metadata per kind, read from the OpenAPI schemas that `kubernetes-validate` ships.

Strategic merge patch and server-side apply need to know, at every list, how it merges
(`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`, `x-kubernetes-list-type`,
`x-kubernetes-list-map-keys`) and, at every map, whether it is atomic.  kube-apiserver reads
these from its compiled-in Go types; we read the same markers from the JSON schema of the
newest Kubernetes version the package ships that we serve (<= 1.33).

The definitions file is parsed once, on first use (about 15 ms); `Meta` nodes resolve `$ref`s
lazily and cache their children, so walking a path costs a few dict look-ups.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import orjson

MAX_VERSION = (1, 33)

Schema = Mapping[str, Any]


class Meta:
    """What the schema says about one position in an object (a field, a list item, the root).

    `strategies` and `merge_key` drive strategic merge patch; `list_type`, `list_map_keys` and
    `map_type` drive server-side apply.  A position the schema does not describe is `UNKNOWN`:
    maps merge, lists are replaced (SMP) or atomic (SSA), as for JSON merge patch.
    """

    __slots__ = ("_children", "_defs", "_extra", "_item", "_schema", "known")

    def __init__(self, schema: Schema | None, defs: Mapping[str, Schema] | None) -> None:
        self._schema: Schema = schema or {}
        self._defs: Mapping[str, Schema] = defs or {}
        self.known = schema is not None
        self._children: dict[str, Meta] = {}
        self._item: Meta | None = None
        self._extra: Meta | None = None

    def __repr__(self) -> str:
        return f"Meta(strategies={sorted(self.strategies)}, merge_key={self.merge_key!r}, list_type={self.list_type!r})"

    # --- markers at this position -------------------------------------------------------

    @property
    def strategies(self) -> frozenset[str]:
        """The patch strategies of this field: a subset of {"merge", "retainKeys", "replace"}."""
        raw = self._schema.get("x-kubernetes-patch-strategy")
        if not isinstance(raw, str):
            return frozenset()
        return frozenset(s.strip() for s in raw.split(",") if s.strip())

    @property
    def merge_key(self) -> str | None:
        raw = self._schema.get("x-kubernetes-patch-merge-key")
        return raw if isinstance(raw, str) and raw else None

    @property
    def list_type(self) -> str | None:
        """`atomic`, `set` or `map` as the schema says, else what kube's schema converter infers.

        A list with patch strategy merge but no list type counts as `map` keyed by its merge key
        (or `set` for a list of scalars), as structured-merge-diff's OpenAPI converter does.
        """
        raw = self._schema.get("x-kubernetes-list-type")
        if raw in ("atomic", "set", "map"):
            return str(raw)
        if "merge" in self.strategies:
            return "map" if self.merge_key else "set"
        return None

    @property
    def list_map_keys(self) -> tuple[str, ...]:
        raw = self._schema.get("x-kubernetes-list-map-keys")
        if isinstance(raw, list) and all(isinstance(k, str) for k in raw) and raw:
            return tuple(raw)
        key = self.merge_key
        return (key,) if key and self.list_type == "map" else ()

    @property
    def map_type(self) -> str:
        """`atomic` when the map must be owned and replaced as a whole, else `granular`."""
        return "atomic" if self._schema.get("x-kubernetes-map-type") == "atomic" else "granular"

    def has_field(self, name: str) -> bool:
        """Whether `name` is a named field of a struct (not a key of a free-form map)."""
        props = self._schema.get("properties")
        return isinstance(props, Mapping) and name in props

    # --- walking ------------------------------------------------------------------------

    def field(self, name: str) -> Meta:
        """The position of map key `name` (a struct field or a value of a free-form map).

        Only named fields are cached per name, so arbitrary keys (labels, ConfigMap data) cannot
        grow the cache.
        """
        child = self._children.get(name)
        if child is not None:
            return child
        if not self.known:
            return UNKNOWN
        props = self._schema.get("properties")
        if isinstance(props, Mapping) and isinstance(props.get(name), Mapping):
            child = self._children[name] = self._resolve(props[name])
            return child
        if self._extra is None:
            extra = self._schema.get("additionalProperties")
            self._extra = self._resolve(extra) if isinstance(extra, Mapping) else UNKNOWN
        return self._extra

    def item(self) -> Meta:
        """The position of this list's items."""
        if self._item is None:
            items = self._schema.get("items")
            self._item = self._resolve(items) if isinstance(items, Mapping) else UNKNOWN
        return self._item

    def _resolve(self, schema: Schema) -> Meta:
        """A node for `schema`, with its `$ref` target merged under the field's own markers."""
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._defs.get(ref.rsplit("/", 1)[-1])
            if target is not None:
                schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return Meta(schema, self._defs)


UNKNOWN = Meta(None, None)
"""The position of anything the schema does not describe (and the root of a kind without one)."""


def _version_of(dirname: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"v(\d+)\.(\d+)\.\d+-local", dirname)
    return (int(m.group(1)), int(m.group(2))) if m else None


@cache
def _definitions() -> tuple[dict[str, Schema], dict[tuple[str, str, str], str]]:
    """All schema definitions, and (group, version, kind) -> definition name."""
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    versions = [(v, p) for p in root.iterdir() if (v := _version_of(p.name)) is not None and v <= MAX_VERSION]
    if not versions:
        return {}, {}
    _, newest = max(versions, key=lambda vp: vp[0])
    data = orjson.loads((newest / "_definitions.json").read_bytes())
    defs: dict[str, Schema] = data.get("$defs") or data.get("definitions") or {}
    index: dict[tuple[str, str, str], str] = {}
    for name, schema in defs.items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
            # The same kind is listed by a few wrapper types (e.g. DeleteOptions); the first wins.
            index.setdefault(key, name)
    return defs, index


# the kinds defined at run time (CustomResourceDefinitions), by (group, version, kind)
_custom: dict[tuple[str, str, str], Meta] = {}
_OBJECT_META_REF = "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def register_custom(group: str, version: str, kind: str, root_schema: Schema) -> None:
    """Merge a custom kind's objects by its version's schema from now on (list types and map
    keys for server-side apply), its metadata as ObjectMeta."""
    defs, _ = _definitions()
    props = dict(root_schema.get("properties") or {})
    props["metadata"] = {"$ref": _OBJECT_META_REF}
    _custom[(group, version, kind)] = Meta({**root_schema, "properties": props}, defs)


def forget_custom(group: str, version: str, kind: str) -> None:
    _custom.pop((group, version, kind), None)


def meta_for(group: str, version: str, kind: str) -> Meta:
    """The root `Meta` of a kind, or `UNKNOWN` when no schema describes it."""
    custom = _custom.get((group, version, kind))
    return custom if custom is not None else _builtin_meta(group, version, kind)


@cache
def _builtin_meta(group: str, version: str, kind: str) -> Meta:
    defs, index = _definitions()
    name = index.get((group, version, kind))
    if name is None:
        return UNKNOWN
    return Meta(defs[name], defs)


def meta_for_object(obj: Mapping[str, Any]) -> Meta:
    """The root `Meta` for an object, from its `apiVersion` and `kind`."""
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return UNKNOWN
    group, _, version = api_version.rpartition("/")
    return meta_for(group, version, kind)


def definitions() -> tuple[dict[str, Schema], dict[tuple[str, str, str], str]]:
    """The parsed definitions and the (group, version, kind) index, shared with other users of
    the same schemas (unknown-field pruning in `apiserver/pruning.py`)."""
    return _definitions()
