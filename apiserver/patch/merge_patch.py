"""RFC 7386 JSON merge patch (application/merge-patch+json).

`merge_patch` is the RFC's algorithm on any JSON values: in an object patch, null deletes the
member and an object merges into the member recursively; anything else (a string, a number, a
list) replaces.  `apply_merge_patch` is what a PATCH of a stored object needs: the body must be an
object (kube-apiserver answers 400 BadRequest for a merge patch that is null, a scalar or that does
not decode), and the result is always an object.  Inputs are never changed.

A merge patch builds nothing its inputs do not hold (the result is at most the object and the
size-checked body together, and the work is one walk of the patch), but the result is still
measured before it is kept (`check_result`: 413 past the request limit).
"""

from __future__ import annotations

import copy
from typing import Any

from apiserver.patch.errors import PatchError, json_type
from apiserver.patch.jsonvalue import check_result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch(target, patch), returning a new value."""
    try:
        if not isinstance(patch, dict):
            return copy.deepcopy(patch)
        return _merge_into(copy.deepcopy(target) if isinstance(target, dict) else {}, patch)
    except RecursionError:
        raise PatchError("the merge patch nests too deeply", 400) from None


def apply_merge_patch(doc: dict[str, Any], patch: object) -> dict[str, Any]:
    """`doc` with the merge patch `patch` (a decoded JSON body) applied."""
    if not isinstance(patch, dict):
        raise PatchError(f"a merge patch must be a JSON object, not {json_type(patch)}", 400)
    result: dict[str, Any] = merge_patch(doc, patch)
    check_result(result)
    return result


def _merge_into(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply `patch` to `target` (a copy the caller owns) in place."""
    for name, value in patch.items():
        if value is None:
            target.pop(name, None)
        elif isinstance(value, dict):
            current = target.get(name)
            target[name] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            target[name] = copy.deepcopy(value)
    return target
