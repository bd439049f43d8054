"""JSON merge patch (RFC 7386, `application/merge-patch+json`).

Maps merge recursively, `null` deletes a key, anything else (lists included) replaces.  It is
also what strategic merge patch does for kinds without a schema, and the reference our tests
hold it to.
"""

from __future__ import annotations

from typing import Any

from apiserver.patch.errors import PatchError
from apiserver.patch.jsonvalue import check_depth, deep_copy


def apply_json_merge_patch(original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`original` with `patch` merged in; neither input is modified."""
    if not isinstance(patch, dict):
        raise PatchError("a merge patch must be a JSON object")
    check_depth(patch)
    result = _merge(deep_copy(original), patch)
    assert isinstance(result, dict)
    return result


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return deep_copy(patch)
    out = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out
