"""PATCH bodies applied to objects, managedFields bookkeeping, and unknown-field checks.

The four patch types map to the pure functions in `apiserver/patch/`; their failures become
Status errors here: a patch that cannot be applied is 422 (as kube answers), a server-side
apply conflict is 409 Conflict naming the other manager and field.
"""

from __future__ import annotations

import time
from typing import Any

from apiserver import errors
from apiserver.http import negotiation
from apiserver.http.params import WriteParams
from apiserver.patch import apply as ssa
from apiserver.patch import schema
from apiserver.patch.errors import PatchError
from apiserver.patch.json_patch import apply_json_patch
from apiserver.patch.merge_patch import apply_merge_patch
from apiserver.patch.strategic import apply_strategic_merge_patch
from apiserver.registry.meta import rfc3339
from apiserver.resources.base import ResourceDef

Obj = dict[str, Any]


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
                return ssa.server_side_apply(old, body, w.field_manager, w.force, meta, rfc3339(time.time()))
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
    return ssa.record_update(old, new, manager, rfc3339(time.time()), subresource=subresource)


def check_fields(res: ResourceDef, obj: Obj, validation: str) -> list[str]:
    """Unknown fields: 400 under Strict, a warning under Warn, nothing under Ignore."""
    if validation == "Ignore":
        return []
    unknown = schema.unknown_fields(res.group, res.version, res.kind, obj)
    if not unknown:
        return []
    if validation == "Strict":
        text = ", ".join(f'unknown field "{f}"' for f in unknown[:10])
        raise errors.bad_request(f"strict decoding error: {text}")
    return [f'unknown field "{f}"' for f in unknown[:10]]
