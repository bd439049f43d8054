"""Small helpers over decoded JSON values shared by the patch modules.

Python's `True == 1` and `1 == 1.0` are not JSON's equality; Go's `interface{}` equality, which
kube's patch code uses, says a bool is never a number and 1 equals 1.0.  `same` says that.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any

import orjson

from apiserver import jsonbudget
from apiserver.patch.errors import PatchError

MAX_DEPTH = jsonbudget.MAX_DEPTH
"""Deepest nesting a patch may have; real objects stay far below it (a Pod is about 12)."""
MAX_RESULT_BYTES = jsonbudget.MAX_BYTES
"""The largest object a patch may produce, as JSON: kube-apiserver's request limit."""


def kind_of(value: Any) -> str:
    """The JSON kind: null, bool, number, string, list or map."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    raise PatchError(f"not a JSON value: {type(value).__name__}")


def same(a: Any, b: Any) -> bool:
    """JSON equality: kinds must match (a bool is not a number), then values, recursively."""
    ka, kb = kind_of(a), kind_of(b)
    if ka != kb:
        return False
    if ka == "list":
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if ka == "map":
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def deep_copy(value: Any) -> Any:
    """A deep copy of a JSON value (orjson round trip: fast, and not limited by Python's stack)."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):
        return copy.deepcopy(value)


def check_depth(value: Any, what: str = "patch") -> None:
    """Refuse a value nested deeper than MAX_DEPTH, so the recursive merges cannot overflow."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise PatchError(f"{what} is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def check_result(value: Any) -> None:
    """Every patch type's result, before it is kept: at most MAX_RESULT_BYTES of JSON (413 in
    kube's words) and MAX_DEPTH deep (422)."""
    try:
        jsonbudget.measure(value, max_bytes=MAX_RESULT_BYTES, max_depth=MAX_DEPTH)
    except jsonbudget.TooLarge:
        raise PatchError(
            f"Request entity too large: limit is {MAX_RESULT_BYTES} (the patched object would be larger)", 413
        ) from None
    except jsonbudget.TooDeep:
        raise PatchError(f"the patched object would be nested more than {MAX_DEPTH} levels deep") from None


def hashable(value: Any) -> Hashable:
    """A hashable stand-in with JSON equality (see `same`), to index list items by value."""
    kind = kind_of(value)
    if kind in ("list", "map"):
        return (kind, orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    if kind == "number" and isinstance(value, float) and value.is_integer():
        return (kind, int(value))
    return (kind, value)
