"""Field sets for server-side apply: which fields of an object a manager owns.

A path is a tuple of path elements in their `managedFields` spelling: `f:<field>`,
`k:{"name":"web"}` (an item of a list keyed by its map keys, keys sorted), `v:<json>` (an item of
a set).  A set of paths is encoded as `fieldsV1` (nested objects; `.` marks a node that is itself
a member when it also has children), exactly as structured-merge-diff writes it.

Which lists are keyed, which are sets and which are atomic comes from the schema (`Meta`);
a list the schema says nothing about is atomic and a map is granular, as kube deduces them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from apiserver.patch.errors import PatchError
from apiserver.patch.jsonvalue import kind_of, same
from apiserver.patch.schema import Meta

Path = tuple[str, ...]
FieldSet = frozenset[Path]

ABSENT: Any = object()
"""Stands for a field that is not there (distinct from an explicit null)."""

# The key fields kube's schema gives a default for, so an item may omit them.
KEY_DEFAULTS = {"protocol": "TCP"}


def _dump(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # integers past 64 bits, which orjson refuses
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


# --- how a list is merged ------------------------------------------------------------------


def granular_list(meta: Meta) -> str | None:
    """`map` or `set` when the list's items are merged one by one, else None (atomic)."""
    list_type = meta.list_type
    if list_type == "map" and meta.list_map_keys:
        return "map"
    if list_type == "set":
        return "set"
    return None


def item_element(item: Any, meta: Meta, how: str, where: str) -> str:
    """The path element of one item of a granular list (`meta` is the list's) (`k:{...}` or `v:...`)."""
    if how == "set":
        if isinstance(item, dict | list) or item is None:
            raise PatchError(f"{where}: an item of a set must be a scalar, not {kind_of(item)}")
        return "v:" + _dump(item)
    if not isinstance(item, dict):
        raise PatchError(f"{where}: an item of a keyed list must be an object, not {kind_of(item)}")
    key: dict[str, Any] = {}
    for name in meta.list_map_keys:
        if name in item:
            key[name] = item[name]
        elif name in KEY_DEFAULTS:
            key[name] = KEY_DEFAULTS[name]
    if not key:
        raise PatchError(f"{where}: an item has none of the key fields {list(meta.list_map_keys)}")
    return "k:" + _dump(key)


def index_items(items: list[Any], meta: Meta, how: str, where: str) -> dict[str, Any]:
    """Items by path element, first occurrence wins (kube tolerates duplicates in live objects)."""
    out: dict[str, Any] = {}
    for item in items:
        out.setdefault(item_element(item, meta, how, where), item)
    return out


# --- the set a configuration claims (structured-merge-diff's ToFieldSet) ------------------


def fields_of(value: Any, meta: Meta, where: str = "") -> set[Path]:
    """The fields an applied configuration sets: its leaves, every list item, every key of a
    free-form map, and every empty or null value.  Atomic maps and lists are single leaves."""
    out: set[Path] = set()
    _fields_of(value, meta, (), out, where)
    return out


def _fields_of(value: Any, meta: Meta, path: Path, out: set[Path], where: str) -> None:
    if isinstance(value, dict):
        if meta.map_type == "atomic":
            out.add(path)
            return
        for key, item in value.items():
            child = (*path, "f:" + key)
            sub = meta.field(key)
            _fields_of(item, sub, child, out, f"{where}.{key}")
            if item is None or item == {} or not meta.has_field(key):
                out.add(child)
    elif isinstance(value, list):
        how = granular_list(meta)
        if how is None:
            out.add(path)
            return
        for item in value:
            child = (*path, item_element(item, meta, how, where))
            _fields_of(item, meta.item(), child, out, where)
            out.add(child)
    else:
        out.add(path)


# --- the difference between two objects (structured-merge-diff's Compare) ---------------


@dataclass
class Comparison:
    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)

    @property
    def changed(self) -> set[Path]:
        return self.added | self.modified


def compare(old: Any, new: Any, meta: Meta) -> Comparison:
    """Which fields `new` adds, modifies and removes relative to `old` (both may be ABSENT)."""
    out = Comparison()
    _compare(old, new, meta, (), out)
    return out


def _is_leaf(value: Any, meta: Meta) -> bool:
    if isinstance(value, dict):
        return not value or meta.map_type == "atomic"
    if isinstance(value, list):
        return not value or granular_list(meta) is None
    return True


def _compare(old: Any, new: Any, meta: Meta, path: Path, out: Comparison) -> None:
    if old is ABSENT:
        out.added.update(all_paths(new, meta, path))
        return
    if new is ABSENT:
        out.removed.update(all_paths(old, meta, path))
        return
    if isinstance(old, dict) and isinstance(new, dict) and not (_is_leaf(old, meta) and _is_leaf(new, meta)):
        if meta.map_type != "atomic":
            for key in {**old, **new}:
                _compare(old.get(key, ABSENT), new.get(key, ABSENT), meta.field(key), (*path, "f:" + key), out)
            return
    how = granular_list(meta)
    if isinstance(old, list) and isinstance(new, list) and how is not None and (old or new):
        items = meta.item()
        old_items = index_items(old, meta, how, "")
        new_items = index_items(new, meta, how, "")
        for pe in {**old_items, **new_items}:
            _compare(old_items.get(pe, ABSENT), new_items.get(pe, ABSENT), items, (*path, pe), out)
        return
    if kind_of(old) != kind_of(new) and not (_is_leaf(old, meta) and _is_leaf(new, meta)):
        out.removed.update(p for p in all_paths(old, meta, path) if p != path)
        out.added.update(p for p in all_paths(new, meta, path) if p != path)
    if not same(old, new):
        out.modified.add(path)


def all_paths(value: Any, meta: Meta, path: Path) -> Iterator[Path]:
    """Every node of a subtree: the node itself, and below it unless it is a leaf."""
    yield path
    if _is_leaf(value, meta):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from all_paths(item, meta.field(key), (*path, "f:" + key))
    else:
        how = granular_list(meta)
        assert how is not None
        for pe, item in index_items(value, meta, how, "").items():
            yield from all_paths(item, meta.item(), (*path, pe))


# --- named fields (structured-merge-diff's EnsureNamedFieldsAreMembers) -------------------


def with_named_parents(paths: Iterable[Path], root: Meta) -> set[Path]:
    """`paths` plus every ancestor that is a named struct field: owning `spec.replicas` means
    owning `spec` too, so that pruning `spec` is prevented by it (a list item or a key of a
    free-form map is never implied this way)."""
    out: set[Path] = set()
    for path in paths:
        out.add(path)
        meta = root
        for i, pe in enumerate(path[:-1]):
            if pe.startswith("f:"):
                name = pe[2:]
                if meta.has_field(name):
                    out.add(path[: i + 1])
                meta = meta.field(name)
            else:
                meta = meta.item()
    return out


def remove_paths(value: Any, paths: set[Path], meta: Meta, path: Path = ()) -> Any:
    """A copy of `value` without the nodes at `paths` (each with all it contains)."""
    if not paths:
        return value
    if isinstance(value, dict) and meta.map_type != "atomic":
        out = {}
        for key, item in value.items():
            child = (*path, "f:" + key)
            if child in paths:
                continue
            out[key] = remove_paths(item, paths, meta.field(key), child)
        return out
    how = granular_list(meta)
    if isinstance(value, list) and how is not None:
        kept = []
        for item in value:
            child = (*path, item_element(item, meta, how, ""))
            if child not in paths:
                kept.append(remove_paths(item, paths, meta.item(), child))
        return kept
    return value


# --- fieldsV1 ------------------------------------------------------------------------------


def _order(pe: str) -> tuple[int, str]:
    return ("fkvi".find(pe[0]) if pe else 9, pe)


def encode(paths: Iterable[Path]) -> dict[str, Any]:
    """The `fieldsV1` object for a set of paths."""
    tree: dict[str, Any] = {}
    members: set[int] = set()
    for path in paths:
        node = tree
        for pe in path:
            node = node.setdefault(pe, {})
        members.add(id(node))
    return _emit(tree, members)


def _emit(node: dict[str, Any], members: set[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pe in sorted(node, key=_order):
        child = node[pe]
        emitted = _emit(child, members)
        if child and id(child) in members:
            emitted = {".": {}, **emitted}
        out[pe] = emitted
    return out


def decode(fields_v1: Any, where: str = "fieldsV1") -> set[Path]:
    """The set of paths a `fieldsV1` object encodes; PatchError if it is malformed."""
    out: set[Path] = set()
    if not isinstance(fields_v1, dict):
        raise PatchError(f"{where} must be an object")
    _decode(fields_v1, (), out, where)
    return out


def _decode(node: dict[str, Any], path: Path, out: set[Path], where: str) -> None:
    for raw, child in node.items():
        if raw == ".":
            if path:
                out.add(path)
            continue
        if not isinstance(child, dict):
            raise PatchError(f"{where}: {raw!r} must map to an object")
        pe = canonical_element(raw, where)
        if child:
            _decode(child, (*path, pe), out, where)
        else:
            out.add((*path, pe))


def canonical_element(raw: str, where: str) -> str:
    """A path element re-spelled the way we write them, so sets from clients compare equal."""
    if len(raw) < 2 or raw[1] != ":" or raw[0] not in "fkvi":
        raise PatchError(f"{where}: {raw!r} is not a field path element")
    if raw[0] in "fi":
        return raw
    try:
        value = json.loads(raw[2:])
    except ValueError:
        raise PatchError(f"{where}: {raw!r} does not hold JSON") from None
    if raw[0] == "k" and not isinstance(value, dict):
        raise PatchError(f"{where}: {raw!r} must hold a JSON object")
    return raw[:2] + _dump(value)


def describe(path: Path) -> str:
    """A path as kube prints it in conflicts: `.spec.containers[name="web"].image`."""
    parts = []
    for pe in path:
        kind, body = pe[0], pe[2:]
        if kind == "f":
            parts.append("." + body)
        elif kind == "k":
            key = json.loads(body)
            parts.append("[" + ",".join(f"{k}={_show(v)}" for k, v in sorted(key.items())) + "]")
        elif kind == "v":
            parts.append(f"[={_show(json.loads(body))}]")
        else:
            parts.append(f"[{body}]")
    return "".join(parts)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else _dump(value)


# --- the create fast path -------------------------------------------------------------------


def encode_all(value: Any, meta: Meta, excluded: frozenset[Path]) -> dict[str, Any]:
    """`encode(set(all_paths(value, meta, ())) - {()} - excluded)` built in one walk, without
    materialising the paths: what a create's manager owns (every field it set).  Equal to the
    general path by construction and by test; it exists because creates are the hot path."""
    return _encode_all(value, meta, (), excluded)


def _encode_all(value: Any, meta: Meta, path: Path, excluded: frozenset[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if _is_leaf(value, meta):
        return out
    if isinstance(value, dict):
        # every element is `f:<key>`, so the keys' own order is fieldsV1's order (_order)
        for key in sorted(value):
            _encode_child(out, "f:" + key, value[key], meta.field(key), path, excluded)
        return out
    if isinstance(value, list):
        how = granular_list(meta)
        assert how is not None  # _is_leaf: a list without a granular kind is one leaf
        item_meta = meta.item()
        items = index_items(value, meta, how, "")
        for pe in sorted(items, key=_order):
            _encode_child(out, pe, items[pe], item_meta, path, excluded)
    return out


def _encode_child(
    out: dict[str, Any], pe: str, item: Any, item_meta: Meta, path: Path, excluded: frozenset[Path]
) -> None:
    child_path = (*path, pe)
    below = _encode_all(item, item_meta, child_path, excluded)
    member = child_path not in excluded
    if member and below:
        out[pe] = {".": {}, **below}
    elif member or below:
        out[pe] = below
