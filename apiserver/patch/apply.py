"""Server-side apply (`application/apply-patch+yaml`) and field ownership for every write.

Simplified from structured-merge-diff, but with its semantics:

- the applied configuration is merged into the live object: maps key by key (atomic maps as a
  whole), lists by their schema type — `map` lists item by item on their map keys, `set` lists
  by value, anything else (and any list the schema does not describe) replaced whole;
- the applier then owns exactly the fields of its configuration (`metadata.managedFields`,
  operation Apply);
- a field it owned last time and no longer applies is removed from the object, unless some
  manager (applier or updater) still owns it;
- changing a field another manager owns is a conflict: `ApplyConflict` unless `force`, which
  takes the field from them; applying the value they already set shares ownership;
- every other write (create, update, patch) goes through `record_update`: the fields it
  changed become the writer's (operation Update) and are taken from everyone else.

Time: an entry's `time` is set to `now` when its manager's write changed the object or what
the manager owns.  Re-applying an unchanged configuration is a complete no-op: the result
equals the live object, managedFields included, so the registry may skip the write.
"""

from __future__ import annotations

import contextlib
from typing import Any

from apiserver.errors import StatusError
from apiserver.patch import fieldpath
from apiserver.patch.errors import PatchError
from apiserver.patch.fieldpath import ABSENT, Path, compare, fields_of, granular_list, item_element
from apiserver.patch.jsonvalue import check_depth, check_result, deep_copy, same
from apiserver.patch.managed import (
    APPLY,
    NEVER_OWNED,
    UPDATE,
    Entry,
    ManagerKey,
    Managers,
    cap_update_managers,
    decode_entries,
    encode_entries,
    key_for,
)
from apiserver.patch.schema import Meta, meta_for_object
from machinery.objects import Obj

BEFORE_FIRST_APPLY = "before-first-apply"


class ApplyConflict(Exception):
    """An apply would change fields other managers own; the HTTP layer answers 409 Conflict.

    `conflicts` lists (manager, field path) pairs, e.g. ("kubectl-client-side-apply",
    ".spec.replicas"); `str()` is kube's message.
    """

    def __init__(self, found: list[tuple[ManagerKey, Path]]) -> None:
        found = sorted(found, key=lambda kp: (kp[0], fieldpath.describe(kp[1])))
        self.conflicts: list[tuple[str, str]] = [(k.manager, fieldpath.describe(p)) for k, p in found]
        self.described: list[tuple[str, str]] = [(k.describe(), fieldpath.describe(p)) for k, p in found]
        super().__init__(self._message())

    def _message(self) -> str:
        if len(self.described) == 1:
            who, path = self.described[0]
            return f"Apply failed with 1 conflict: conflict with {who}: {path}"
        lines = []
        for who in sorted({who for who, _ in self.described}):
            lines.append(f"conflicts with {who}:")
            lines.extend(f"- {path}" for w, path in self.described if w == who)
        return f"Apply failed with {len(self.described)} conflicts: " + "\n".join(lines)

    def to_status_error(self) -> StatusError:
        """The 409 kube answers, with one FieldManagerConflict cause per field."""
        causes = [
            {"reason": "FieldManagerConflict", "message": f"conflict with {who}", "field": path}
            for who, path in self.described
        ]
        return StatusError(409, "Conflict", str(self), {"causes": causes})


def server_side_apply(
    live: Obj | None,
    applied: Obj,
    manager: str,
    force: bool,
    meta: Meta,
    now: str,
    *,
    subresource: str = "",
) -> Obj:
    """The object after `manager` applies `applied` to `live` (None: the object is created).

    Neither input is modified.  Raises PatchError for a malformed configuration and
    ApplyConflict when another manager owns a field this apply changes and `force` is False.
    """
    api_version = _check_config(applied, manager)
    live_obj: Obj = {} if live is None else _without_managed_fields(deep_copy(live))
    managers = _live_managers(live)
    if live is not None and not managers:
        # kube's skipNonApplied: an object nobody tracked yet is first owned by this pseudo-updater.
        _record(managers, {}, live_obj, key_for(BEFORE_FIRST_APPLY, UPDATE, _api_version(live_obj)), meta, now)

    merged = _merge(deep_copy(live_obj), applied, meta, "")
    key = key_for(manager, APPLY, api_version, subresource)
    last = managers.get(key)
    claimed = fields_of(applied, meta) - NEVER_OWNED
    managers[key] = Entry(claimed, api_version, last.time if last else None)
    if last is not None:
        owned = fieldpath.with_named_parents((p for e in managers.values() for p in e.fields), meta)
        merged = fieldpath.remove_paths(merged, fieldpath.with_named_parents(last.fields, meta) - owned, meta)

    diff = compare(live_obj, merged, meta)
    conflicts = [(k, p) for k, e in managers.items() if k != key for p in e.fields & diff.changed]
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    for k, entry in managers.items():
        if k != key:
            entry.fields -= diff.changed | diff.removed

    result = _without_nulls(merged)
    check_result(result)  # before ownership is computed and the object kept
    if live is None or not same(result, _without_nulls(live_obj)) or last is None or last.fields != claimed:
        managers[key].time = now
    return _with_managed_fields(result, managers)


def record_update(
    old: Obj | None,
    new: Obj,
    manager: str,
    now: str,
    *,
    meta: Meta | None = None,
    subresource: str = "",
) -> Obj:
    """`new` with managedFields updated for a create (`old` None), update or non-apply patch.

    The fields that changed become `manager`'s (operation Update, at `new`'s apiVersion) and
    are taken from every other manager.  As in kube: managedFields sent in `new` replace the
    stored ones (that is how a client resets them); otherwise the stored ones are kept; an
    existing object that has none is not tracked until its first apply.  `meta` defaults to
    the schema of `new`'s kind.  `new` is not modified.
    """
    if meta is None:
        meta = meta_for_object(new)
    managers: Managers = {}
    metadata = new.get("metadata")
    sent = metadata.get("managedFields") if isinstance(metadata, dict) else None
    from_client = False
    if sent and not subresource:
        with contextlib.suppress(PatchError):  # unreadable: kube falls back to the stored entries
            managers, from_client = decode_entries(sent), True
    if not from_client:
        managers = _live_managers(old)
    result = _without_managed_fields(deep_copy(new))
    if old is not None and not managers and not from_client:
        return result
    if old is None and not managers and isinstance(result.get("metadata", {}), dict):
        # a create: the manager owns every field it set (the hot path, without path sets)
        tree = fieldpath.encode_all(result, meta, NEVER_OWNED)
        metadata = result.setdefault("metadata", {})
        if tree:
            row: dict[str, Any] = {"manager": manager, "operation": UPDATE, "apiVersion": _api_version(result)}
            row.update({"time": now, "fieldsType": "FieldsV1", "fieldsV1": tree})
            if subresource:
                row["subresource"] = subresource
            metadata["managedFields"] = [row]
        return result
    old_obj = {} if old is None else _without_managed_fields(deep_copy(old))
    _record(managers, old_obj, result, key_for(manager, UPDATE, _api_version(result), subresource), meta, now)
    cap_update_managers(managers)
    return _with_managed_fields(result, managers)


# --- ownership -----------------------------------------------------------------------------


def _record(managers: Managers, old: Obj, new: Obj, key: ManagerKey, meta: Meta, now: str) -> None:
    """An Update by `key`: what changed is now its, and no one else's."""
    diff = compare(old, new, meta)
    for entry in managers.values():
        entry.fields -= diff.changed | diff.removed
    taken = diff.changed - NEVER_OWNED
    if taken:
        previous = managers.get(key)
        fields = taken | (previous.fields if previous else set())
        managers[key] = Entry(fields, _api_version(new), now)
    for k in [k for k, e in managers.items() if not e.fields]:
        del managers[k]


def _live_managers(live: Obj | None) -> Managers:
    if live is None or not isinstance(live.get("metadata"), dict):
        return {}
    try:
        return decode_entries(live["metadata"].get("managedFields"))
    except PatchError:
        return {}  # unreadable stored ownership: start over rather than refuse every write


def _with_managed_fields(obj: Obj, managers: Managers) -> Obj:
    entries = encode_entries({k: e for k, e in managers.items() if e.fields})
    metadata = obj.setdefault("metadata", {})
    if entries:
        metadata["managedFields"] = entries
    else:
        metadata.pop("managedFields", None)
    return obj


def _without_managed_fields(obj: Obj) -> Obj:
    if isinstance(obj.get("metadata"), dict):
        obj["metadata"].pop("managedFields", None)
    return obj


def _api_version(obj: Obj) -> str:
    value = obj.get("apiVersion")
    return value if isinstance(value, str) else ""


def _check_config(applied: Any, manager: str) -> str:
    """The configuration's apiVersion, after checking what kube checks of an apply body."""
    if not isinstance(applied, dict):
        raise PatchError("an apply configuration must be a JSON object")
    check_depth(applied, "apply configuration")
    if not manager:
        raise PatchError("fieldManager is required for apply")
    metadata = applied.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise PatchError("metadata must be an object")
    if metadata and metadata.get("managedFields") is not None:
        raise PatchError("metadata.managedFields must be nil")
    for name in ("apiVersion", "kind"):
        if not isinstance(applied.get(name), str) or not applied[name]:
            raise PatchError(f"{name} must be set")
    return str(applied["apiVersion"])


# --- merging the configuration into the live object ----------------------------------------


def _merge(live: Any, config: Any, meta: Meta, where: str) -> Any:
    """`config` merged into `live` (which this module owns): config wins at every leaf."""
    if live is ABSENT:
        return deep_copy(config)
    if isinstance(live, dict) and isinstance(config, dict) and meta.map_type != "atomic" and (live or config):
        for key, value in config.items():
            live[key] = _merge(live.get(key, ABSENT), value, meta.field(key), f"{where}.{key}")
        return live
    how = granular_list(meta)
    if isinstance(live, list) and isinstance(config, list) and how is not None and (live or config):
        return _merge_list(live, config, meta, how, where)
    return deep_copy(config)


def _merge_list(live: list[Any], config: list[Any], meta: Meta, how: str, where: str) -> list[Any]:
    """Merge a keyed list or set item by item, in structured-merge-diff's order: live items keep
    their places, items both sides have follow the configuration's order, new ones come where
    the configuration puts them.  `meta` is the list's."""
    items = meta.item()
    left = [item_element(item, meta, how, where) for item in live]
    right = [item_element(item, meta, how, where) for item in config]
    if len(set(right)) != len(right):
        raise PatchError(f"{where}: duplicate entries for the same key")
    live_by: dict[str, Any] = {}
    for pe, item in zip(left, live, strict=True):
        live_by.setdefault(pe, item)
    config_by = dict(zip(right, config, strict=True))
    shared = [pe for pe in right if pe in live_by]
    pending = iter(shared)
    next_shared = next(pending, None)
    done: set[str] = set()
    out: list[Any] = []
    li = ri = 0
    while li < len(left) or ri < len(right):
        if li < len(left) and ri < len(right):
            pe = left[li]
            if pe == right[ri]:
                if pe not in done:
                    done.add(pe)
                    out.append(_merge(live_by[pe], config_by[pe], items, where))
                li, ri = li + 1, ri + 1
                next_shared = next(pending, None)
                continue
            if pe in config_by and next_shared is not None and next_shared != pe:
                li += 1  # a shared item the configuration wants later
                continue
        if li < len(left):
            pe = left[li]
            if pe not in config_by:
                out.append(live[li])
                li += 1
                continue
            if pe in done:
                li += 1
        if ri < len(right):
            pe = right[ri]
            done.add(pe)
            out.append(_merge(live_by.get(pe, ABSENT), config_by[pe], items, where))
            ri += 1
            if next_shared == pe:
                next_shared = next(pending, None)
    return out


def _without_nulls(value: Any) -> Any:
    """Drop null map values: an applied null claims the field and clears it, as kube's decoding
    into typed objects does."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
