"""Strategic merge patch (`application/strategic-merge-patch+json`), as kube-apiserver applies it.

The rules (from k8s.io/apimachinery/pkg/util/strategicpatch, re-derived, not copied):

- maps merge recursively; `null` deletes a key; a value of another JSON kind replaces;
- a list whose field has patch strategy `merge` merges: maps by the field's merge key (items
  found in the original are merged, new ones added), scalars as a union; any other list is
  replaced;
- directives: `$patch: replace` (use this map / list as is), `$patch: delete` (a map becomes
  empty; a list item `{"$patch": "delete", <key>: v}` removes the items with that key),
  `$patch: merge` (on a map: the default, accepted), `$retainKeys: [...]` (drop the original's
  other keys), `$deleteFromPrimitiveList/<f>: [...]` (remove those scalars from list f),
  `$setElementOrder/<f>: [...]` (the order of list f after the merge);
- item order: kube's order rules — patch items in patch (or `$setElementOrder`) order,
  interleaved with server-only items kept in their original order; an item new to the list
  comes before the server-only items that follow it (so an added container lands first).

Values taken from the patch whole (a new key, a replaced list) lose their directives and
`null`s, as they would once kube decodes them into its Go types.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from apiserver.patch.errors import PatchError
from apiserver.patch.jsonvalue import check_depth, check_result, deep_copy, hashable, kind_of
from apiserver.patch.schema import Meta
from machinery.objects import Obj

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM_LIST = "$deleteFromPrimitiveList/"
SET_ORDER = "$setElementOrder/"

Ident = Callable[[Any], Hashable]


def apply_strategic_merge_patch(original: Obj, patch: Obj, meta: Meta) -> Obj:
    """`original` with `patch` applied under the patch rules of `meta` (the kind's root).

    Neither input is modified.  Raises PatchError naming what is wrong with the patch.
    """
    if not isinstance(original, dict):
        raise PatchError("the object to patch must be a JSON object")
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    check_depth(patch)
    result = _merge_map(deep_copy(original), patch, meta, "")
    check_result(result)  # no copies: at most the object and the body together, still measured
    return result


# --- maps ----------------------------------------------------------------------------------


def _merge_map(original: Obj, patch: Mapping[str, Any], meta: Meta, where: str) -> Obj:
    """Merge `patch` into `original` (a copy this module owns and may change) and return it."""
    directive = patch.get(DIRECTIVE)
    if DIRECTIVE in patch:
        if directive == "replace":
            return _clean_map({k: v for k, v in patch.items() if k != DIRECTIVE})
        if directive == "delete":
            return {}
        if directive != "merge":
            raise PatchError(f"{_at(where)}unknown patch directive {DIRECTIVE}: {directive!r}")

    _retain_keys(original, patch, where)
    done = _set_element_orders(original, patch, meta, where)

    # Deletions from primitive lists first, so that a patch adding and deleting is deterministic.
    for key, value in patch.items():
        if key.startswith(DELETE_FROM_LIST):
            field = _suffix(key, DELETE_FROM_LIST, where)
            _delete_from_primitive_list(original, field, value, _join(where, field))

    for key, value in patch.items():
        if key in done or key in (DIRECTIVE, RETAIN_KEYS) or key.startswith((DELETE_FROM_LIST, SET_ORDER)):
            continue
        path = _join(where, key)
        if value is None:
            original.pop(key, None)
            continue
        if key not in original or kind_of(original[key]) != kind_of(value):
            _set_clean(original, key, value)
            continue
        current = original[key]
        field_meta = meta.field(key)
        if isinstance(value, dict):
            if "replace" in field_meta.strategies:
                original[key] = _clean_map(value)
            else:
                original[key] = _merge_map(current, value, field_meta, path)
        elif isinstance(value, list):
            original[key] = _merge_list_field(current, value, field_meta, path)
        else:
            original[key] = value
    return original


def _retain_keys(original: Obj, patch: Mapping[str, Any], where: str) -> None:
    """`$retainKeys`: drop every key of the original that the list does not name."""
    if RETAIN_KEYS not in patch:
        return
    retained = patch[RETAIN_KEYS]
    if not isinstance(retained, list) or not all(isinstance(k, str) for k in retained):
        raise PatchError(f"{_at(where)}{RETAIN_KEYS} must be a list of field names")
    keep = set(retained)
    for key, value in patch.items():
        if value is None or key in (DIRECTIVE, RETAIN_KEYS) or key.startswith((DELETE_FROM_LIST, SET_ORDER)):
            continue
        if key not in keep:
            raise PatchError(f"{_at(where)}{RETAIN_KEYS} must contain every key in the patch, not {key!r}")
    for key in [k for k in original if k not in keep]:
        del original[key]


def _delete_from_primitive_list(original: Obj, field: str, value: Any, where: str) -> None:
    if value is None:
        original.pop(field, None)
        return
    if not isinstance(value, list):
        raise PatchError(f"{_at(where)}{DELETE_FROM_LIST}{field} must be a list")
    current = original.get(field)
    if not isinstance(current, list):
        return
    if any(isinstance(v, dict | list) for v in value):
        raise PatchError(f"{_at(where)}{DELETE_FROM_LIST}{field} may only list scalars")
    gone = {hashable(v) for v in value}
    original[field] = [item for item in current if hashable(item) not in gone]


def _set_element_orders(original: Obj, patch: Mapping[str, Any], meta: Meta, where: str) -> set[str]:
    """Merge each list named by a `$setElementOrder/<f>` and order it; return the fields done."""
    done: set[str] = set()
    for key, order in patch.items():
        if not key.startswith(SET_ORDER):
            continue
        field = _suffix(key, SET_ORDER, where)
        path = _join(where, field)
        if not isinstance(order, list):
            raise PatchError(f"{_at(path)}{SET_ORDER}{field} must be a list")
        field_meta = meta.field(field)
        merge_key = field_meta.merge_key if "merge" in field_meta.strategies else None
        current, patch_list = original.get(field), patch.get(field)
        if field in original and not isinstance(current, list):
            raise PatchError(f"{_at(path)}{SET_ORDER}{field} names a field that is not a list")
        if field in patch and not isinstance(patch_list, list):
            raise PatchError(f"{_at(path)}the list beside {SET_ORDER}{field} must be a list")
        ident = _identity(merge_key, path)
        _check_order_matches(patch_list or [], order, ident, path)
        if isinstance(current, list) and isinstance(patch_list, list):
            merged = _merge_list_field(current, patch_list, field_meta, path)
        elif isinstance(patch_list, list):
            merged = _clean_list(patch_list)
        elif isinstance(current, list):
            merged = current
        else:
            continue
        original[field] = _order(merged, order, current or [], ident)
        done.add(field)
    return done


def _check_order_matches(patch_list: list[Any], order: list[Any], ident: Ident, where: str) -> None:
    """The patch list's items (deletions aside) must appear in `$setElementOrder`, in its order."""
    wanted = [ident(i) for i in order]
    pos = 0
    for item in patch_list:
        if isinstance(item, dict) and DIRECTIVE in item:
            continue
        key = ident(item)
        while pos < len(wanted) and wanted[pos] != key:
            pos += 1
        if pos == len(wanted):
            raise PatchError(f"{_at(where)}the order of the patch list does not match {SET_ORDER}")
        pos += 1


# --- lists ---------------------------------------------------------------------------------


def _merge_list_field(current: list[Any], patch: list[Any], meta: Meta, where: str) -> list[Any]:
    if "merge" not in meta.strategies:
        return _clean_list(patch)
    return _merge_list(current, patch, meta, where)


def _merge_list(original: list[Any], patch: list[Any], meta: Meta, where: str) -> list[Any]:
    """Merge two lists of a field with patch strategy `merge`."""
    if not original and not patch:
        return original
    kinds = {kind_of(v) for v in [*original, *patch]}
    if "list" in kinds:
        raise PatchError(f"{_at(where)}lists of lists cannot be merged")
    if len(kinds) > 1:
        raise PatchError(f"{_at(where)}list items are not all of one kind")
    if kinds != {"map"}:
        ident = _identity(None, where)
        union: dict[Hashable, Any] = {}
        for item in [*original, *patch]:
            union.setdefault(ident(item), item)
        return _order(list(union.values()), patch, original, ident)

    merge_key = meta.merge_key
    if merge_key is None:
        raise PatchError(f"{_at(where)}cannot merge a list of objects that has no merge key")
    ident = _identity(merge_key, where)
    original, items, replace = _apply_item_directives(original, patch, ident, where)
    if replace:
        return [_clean_map(item) for item in items]
    merged = list(original)
    position: dict[Hashable, int] = {}
    for i, m in enumerate(merged):
        position.setdefault(ident(m), i)
    for item in items:
        key = ident(item)
        if key in position:
            at = position[key]
            merged[at] = _merge_map(merged[at], item, meta.item(), f"{where}[{merge_key}={item[merge_key]}]")
        else:
            position[key] = len(merged)
            merged.append(_clean_map(item))
    return _order(merged, items, original, ident)


def _apply_item_directives(
    original: list[Any], patch: list[Any], ident: Ident, where: str
) -> tuple[list[Any], list[Obj], bool]:
    """Handle `$patch` list items: returns (original after deletions, plain items, replace?)."""
    plain: list[Obj] = []
    deleted: set[Hashable] = set()
    replace = False
    for item in patch:
        if DIRECTIVE not in item:
            ident(item)  # every item needs its merge key
            plain.append(item)
            continue
        directive = item[DIRECTIVE]
        if directive == "delete":
            deleted.add(ident(item))
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError(f"{_at(where)}$patch: merge is not supported on list items")
        else:
            raise PatchError(f"{_at(where)}unknown patch directive {DIRECTIVE}: {directive!r}")
    if deleted:
        original = [m for m in original if ident(m) not in deleted]
    return original, plain, replace


def _order(merged: list[Any], patch_order: Sequence[Any], server_order: Sequence[Any], ident: Ident) -> list[Any]:
    """kube's item order: items named in `patch_order` in that order, interleaved with the other
    (server-only) items in their `server_order`; a server-only item is taken only while it comes
    before the next patch item in `server_order`, so an item new to the list is taken at once."""
    wanted = _positions(patch_order, ident)
    server = _positions(server_order, ident)
    patch_items = sorted((m for m in merged if ident(m) in wanted), key=lambda m: wanted[ident(m)])
    server_only = sorted((m for m in merged if ident(m) not in wanted), key=lambda m: server.get(ident(m), len(server)))
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if j >= len(patch_items):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(patch_items[j])
            j += 1
        else:
            left, right = server.get(ident(server_only[i])), server.get(ident(patch_items[j]))
            if left is not None and right is not None and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(patch_items[j])
                j += 1
    return out


def _positions(items: Sequence[Any], ident: Ident) -> dict[Hashable, int]:
    out: dict[Hashable, int] = {}
    for i, item in enumerate(items):
        if not (isinstance(item, dict) and DIRECTIVE in item):
            out.setdefault(ident(item), i)
    return out


def _identity(merge_key: str | None, where: str) -> Ident:
    """What identifies a list item: its merge key's value, or the item itself for scalars."""
    if merge_key is None:
        return hashable

    def key_of(item: Any) -> Hashable:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"{_at(where)}a list item has no merge key {merge_key!r}")
        return hashable(item[merge_key])

    return key_of


# --- values taken whole from the patch -----------------------------------------------------


def _set_clean(original: Obj, key: str, value: Any) -> None:
    if isinstance(value, dict) and DIRECTIVE in value:
        original.pop(key, None)  # a directive with nothing to act on leaves nothing behind
        return
    original[key] = _clean(value)


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return _clean_map(value)
    if isinstance(value, list):
        return _clean_list(value)
    return value


def _clean_map(value: Mapping[str, Any]) -> Obj:
    """A copy without nulls, directive keys, or maps that are directives."""
    out: Obj = {}
    for key, item in value.items():
        if item is None or key in (DIRECTIVE, RETAIN_KEYS) or key.startswith((DELETE_FROM_LIST, SET_ORDER)):
            continue
        if isinstance(item, dict) and DIRECTIVE in item:
            continue
        out[key] = _clean(item)
    return out


def _clean_list(value: list[Any]) -> list[Any]:
    return [_clean(item) for item in value if not (isinstance(item, dict) and DIRECTIVE in item)]


# --- naming where we are -------------------------------------------------------------------


def _suffix(key: str, prefix: str, where: str) -> str:
    field = key[len(prefix) :]
    if not field:
        raise PatchError(f"{_at(where)}{key!r} names no field")
    return field


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _at(where: str) -> str:
    return f"{where}: " if where else ""
