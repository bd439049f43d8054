"""RFC 6902 JSON patch (application/json-patch+json) applied to a stored object.

The operations themselves are the `jsonpatch` package's; this module gives them Kubernetes'
answers: a body that is not a list of operation objects is 400 (kube-apiserver fails to decode
it), more than 10000 operations is 413, and an operation that does not apply (unknown `op`,
missing `path`/`from`/`value`, a path that does not exist, a failed `test`) is 422.  The patch
applies all or nothing, and the result must still be an object.

What a patch may build is bounded as kube bounds it, DURING application: `add` and `replace`
only insert values the (already size-checked) body holds, so the one operation that grows a
document beyond its inputs is `copy`; as in kube (evanphx/json-patch's AccumulatedCopySizeLimit,
set to the apiserver's JSONPatchMaxCopyBytes, 3 MiB), the JSON size of everything the
operations copy adds up, and the copy that would pass 3 MiB is refused (422, kube's words)
before it is made.  Thirty copies of a document into itself, each doubling it, stop at the
sixth instead of building 2^30 maps.  The work an operation does is then bounded too: a path
walk, a copy (within the budget), or a `test` comparison (of a value from the body).  The
result is measured once more at the end (`check_result`: 413 past the request limit).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import jsonpointer

from apiserver import jsonbudget
from apiserver.patch.errors import PatchError, json_type
from apiserver.patch.jsonvalue import check_result

MAX_OPERATIONS = 10000  # kube-apiserver's maxJSONPatchOperations
MAX_COPY_BYTES = jsonbudget.MAX_BYTES  # kube-apiserver's JSONPatchMaxCopyBytes


def apply_json_patch(doc: dict[str, Any], patch: object) -> dict[str, Any]:
    """`doc` with the operations of `patch` (a decoded JSON body) applied; `doc` is not changed."""
    if not isinstance(patch, list):
        raise PatchError(f"a JSON patch must be a list of operations, not {json_type(patch)}", 400)
    if len(patch) > MAX_OPERATIONS:
        raise PatchError(f"The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {len(patch)}", 413)
    for i, op in enumerate(patch):
        if not isinstance(op, dict):
            raise PatchError(f"JSON patch operation {i} must be an object, not {json_type(op)}", 400)
    result: Any = copy.deepcopy(doc)
    copied = 0
    for i, op in enumerate(patch):
        if op.get("op") == "copy":
            try:
                copied += _copy_size(result, op.get("from"), copied)
            except PatchError as e:
                raise PatchError(f"JSON patch operation {i} ({_describe(op)}): {e.message}") from None
        try:
            # one operation at a time, so the message can say which one failed; all-or-nothing
            # holds because a failure discards `result`, a copy (atomic: a half-done move is undone, so
            # the message reads the document as the operation found it)
            result = jsonpatch.JsonPatch([op]).apply(result, in_place=True, atomic=True)
        except jsonpatch.InvalidJsonPatch as e:
            raise PatchError(f"JSON patch operation {i} ({_describe(op)}): {_short(str(e))}") from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
            raise PatchError(f"JSON patch operation {i} ({_describe(op)}): {_why(result, op, e)}") from None
        except RecursionError:
            raise PatchError(f"JSON patch operation {i}: the value nests too deeply") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            # hostile shapes the library does not check (a non-string `from`, a path into a scalar...)
            raise PatchError(
                f"JSON patch operation {i} ({_describe(op)}): cannot be applied: {_short(str(e))}"
            ) from None
    if not isinstance(result, dict):
        raise PatchError(f"the JSON patch leaves {json_type(result)} where an object must be")
    check_result(result)
    return result


def _copy_size(doc: Any, source: object, copied: int) -> int:
    """The JSON size of what a `copy` from `source` would add; PatchError in kube's words when it
    takes the patch's copies past MAX_COPY_BYTES.  A source that does not resolve costs nothing
    here (the operation then fails, saying why)."""
    if not isinstance(source, str):
        return 0
    try:
        value = jsonpointer.resolve_pointer(doc, source)
    except (jsonpointer.JsonPointerException, TypeError, ValueError, KeyError, IndexError, AttributeError):
        return 0
    try:
        return jsonbudget.measure(value, max_bytes=MAX_COPY_BYTES - copied, max_depth=1 << 30)
    except jsonbudget.TooLarge as e:
        grown = copied + e.at_least
        raise PatchError(
            f"Unable to complete the copy, the accumulated size increase of copy is {grown}, "
            f"exceeding the limit {MAX_COPY_BYTES}"
        ) from None


def _why(doc: Any, op: dict[str, Any], error: Exception) -> str:
    """Why a well-formed operation did not apply, worded from the document (the library's own
    messages print the whole document)."""
    kind, path, source = op.get("op"), op.get("path"), op.get("from")
    problem = _locate(doc, source) if kind in ("move", "copy") and isinstance(source, str) else None
    if problem is None and isinstance(path, str):
        must_exist = kind in ("remove", "replace", "test")
        problem = _locate(doc, path) if must_exist else _locate(doc, path.rpartition("/")[0], container=True)
    if kind == "test":
        if problem is None and isinstance(path, str):
            found = jsonpointer.resolve_pointer(doc, path)
            return f"test failed: {path} is {_show(found)}, not {_show(op.get('value'))}"
        return f"test failed: {problem or _short(str(error))}"
    return problem or _short(str(error))


def _locate(doc: Any, pointer: str, container: bool = False) -> str | None:
    """Why `pointer` names no existing value in `doc` (with `container`, no object or list),
    or None when it does."""
    try:
        parts = jsonpointer.JsonPointer(pointer).parts
    except jsonpointer.JsonPointerException as e:
        return f"bad path {pointer!r}: {e}"
    node, walked = doc, ""
    for part in parts:
        here = f"{walked}/{jsonpointer.escape(part)}"
        if isinstance(node, dict):
            if part not in node:
                return f"{here} does not exist"
            node = node[part]
        elif isinstance(node, list):
            if not part.isdigit() or (part != "0" and part.startswith("0")) or int(part) >= len(node):
                return f"{here} does not exist ({walked or 'the document'} is a list of {len(node)})"
            node = node[int(part)]
        else:
            return f"{here} does not exist ({walked or 'the document'} is {json_type(node)})"
        walked = here
    if container and not isinstance(node, dict | list):
        return f"{walked or 'the document'} is {json_type(node)}, which has no members"
    return None


def _show(value: object) -> str:
    return _short(json.dumps(value, default=str, sort_keys=True), 80)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(op: dict[str, Any]) -> str:
    """`remove /spec/x`, for messages; never fails whatever `op` holds."""
    kind, path = op.get("op"), op.get("path")
    kind_text = kind if isinstance(kind, str) else "?" if kind is None else repr(kind)
    path_text = path if isinstance(path, str) else "?" if path is None else repr(path)
    return f"{kind_text} {path_text}"[:200]
