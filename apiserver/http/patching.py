"""PATCH bodies applied to objects, managedFields bookkeeping, and unknown-field checks.

The four patch types map to the pure functions in `apiserver/patch/`; their failures become
Status errors here: a patch that cannot be applied is 422 (as kube answers), a server-side
apply conflict is 409 Conflict naming the other manager and field.
"""

from __future__ import annotations

import time
from typing import Any

from apiserver import errors, pruning
from apiserver.http import negotiation, yamlbody
from apiserver.http.duplicate_fields import duplicate_field_texts
from apiserver.http.params import WriteParams
from apiserver.patch import apply as ssa
from apiserver.patch import schema
from apiserver.patch.errors import PatchError
from apiserver.patch.json_patch import apply_json_patch
from apiserver.patch.merge_patch import apply_merge_patch
from apiserver.patch.strategic import apply_strategic_merge_patch
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj
from machinery.timestamps import format_time


def _gv(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def apply_patch(
    content_type: str, old: Obj | None, body: Any, kind: str, group: str, w: WriteParams, res: ResourceDef | None = None
) -> Obj:
    version = res.version if res is not None else "v1"
    try:
        if content_type == negotiation.APPLY_PATCH:
            meta = schema.meta_for(group, version, kind)
            try:
                return ssa.server_side_apply(old, body, w.field_manager, w.force, meta, format_time(time.time()))
            except ssa.ApplyConflict as e:
                raise e.to_status_error() from None
        assert old is not None
        if content_type == negotiation.JSON_PATCH:
            return apply_json_patch(old, body)
        if content_type == negotiation.MERGE_PATCH:
            return apply_merge_patch(old, body)
        return apply_strategic_merge_patch(old, body, schema.meta_for(group, version, kind))
    except PatchError as e:
        if e.code != 422:  # a malformed patch (400), too many operations or too large a result (413)
            raise e.to_status_error() from None
        raise errors.StatusError(422, "Invalid", f"the patch cannot be applied: {e}") from None


def _conflict(e: Any, res: ResourceDef | None, old: Obj | None, body: Obj) -> errors.StatusError:
    name = str(((old or body).get("metadata") or {}).get("name", ""))
    plural = res.plural if res else ""
    group = res.group if res else ""
    err = errors.conflict(plural, name, group, str(e))
    err.message = f"Apply failed with {e!s}" if not str(e).startswith("Apply failed") else str(e)
    return err


def track_fields(old: Obj | None, new: Obj, manager: str, subresource: str = "") -> Obj:
    """managedFields for a write that is not an apply (apply keeps its own); a write through
    /status is its manager's own entry (`subresource: status`), as kube records it."""
    if not manager:
        return new
    return ssa.record_update(old, new, manager, format_time(time.time()), subresource=subresource)


def prune_body(
    res: ResourceDef,
    obj: Obj,
    validation: str,
    kind: str = "",
    group: str | None = None,
    duplicates: list[str] | None = None,
) -> list[str]:
    """A create or update body: its unknown fields dropped (always, as kube's decoder drops
    them), then refused under Strict with the decoder's words, or named in one warning each.

    `kind`/`group` name another schema than the resource's (a Scale sent to /scale);
    `duplicates`: the body's repeated keys (duplicate_fields.py), after the unknown ones as kube's
    decoder lists them."""
    kind, group = kind or res.kind, res.group if group is None else group
    paths = pruning.prune(group, res.version, kind, obj)
    prefix = f'{kind} in version "{res.version}" cannot be handled as a {kind}: '
    return _judge(paths, validation, prefix, after=duplicate_field_texts(duplicates or []))


def prune_patched(res: ResourceDef, obj: Obj, validation: str, found_in_patch: list[str] | None = None) -> list[str]:
    """The result of a JSON, merge or strategic merge patch: kube decodes it strictly too, so a
    field the patch brought that the kind does not have is dropped, then judged as for a body.

    kube names them in key order (the patched object is a Go map when it is decoded);
    `found_in_patch` (a JSON patch's own unknown op fields) come first."""
    paths = sorted(pruning.prune(res.group, res.version, res.kind, obj))
    return _judge(paths, validation, "", found_in_patch or [])


JSON_PATCH_OP_FIELDS = frozenset({"op", "path", "value", "from"})


def json_patch_unknown_fields(ops: Any) -> list[str]:
    """Fields of JSON patch operations that RFC 6902 does not define, as kube words them."""
    if not isinstance(ops, list):
        return []
    found: list[str] = []
    for i, op in enumerate(ops):
        if isinstance(op, dict):
            found.extend(f'json patch unknown field "[{i}].{k}"' for k in op if k not in JSON_PATCH_OP_FIELDS)
        if len(found) >= pruning.MAX_REPORTED:
            return found[: pruning.MAX_REPORTED]
    return found


def _judge(
    paths: list[str], validation: str, prefix: str, before: list[str] | None = None, after: list[str] | None = None
) -> list[str]:
    texts = [*(before or []), *pruning.unknown_field_texts(paths), *(after or [])]
    if not texts or validation == "Ignore":
        return []
    if validation == "Strict":
        raise errors.bad_request(f"{prefix}strict decoding error: {', '.join(texts)}")
    return texts


def strict_yaml(raw: bytes, validation: str) -> list[str]:
    """An apply patch's YAML decoded strictly, as kube does under `Strict` (400 naming each
    repeated key) and `Warn` (a warning each); nothing under `Ignore`."""
    if validation == "Ignore" or not raw:
        return []
    try:
        repeated = yamlbody.duplicate_keys(raw)
    except Exception:  # the body decoded once already: a second pass adds no new refusal
        return []
    if not repeated:
        return []
    text = "error converting YAML to JSON: yaml: unmarshal errors:\n  " + "\n  ".join(repeated)
    if validation == "Strict":
        raise errors.bad_request(f"error strict decoding YAML: {text}")
    return [text]


def refuse_unknown_applied(res: ResourceDef, config: Obj, namespace: str | None, name: str) -> None:
    """Server-side apply types the applied configuration against the schema before merging, so
    a field the kind does not have refuses the apply whatever `fieldValidation` says.  kube
    answers that with a 500 (kubernetes/kubernetes#122480, #139253); it is the client's
    mistake, so we answer 400 BadRequest with kube's message."""
    # pruning changes `config` only when it finds a field, and then the apply is refused
    paths = pruning.prune(res.group, res.version, res.kind, config, apply_paths=True)
    if paths:
        gvk = f"{res.group}/{res.version}, Kind={res.kind}"
        raise errors.bad_request(
            f"failed to create typed patch object ({namespace or ''}/{name}; {gvk}): {pruning.not_declared(paths)}"
        )
