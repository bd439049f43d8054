"""How big a decoded JSON value is, measured once against a budget and never past it.

The 3 MiB request limit (kube-apiserver's MaxRequestBodyBytes) only bounds what arrives; what
a body or a patch EXPANDS to is bounded here: `measure` walks a value and adds up the bytes its
compact JSON would have (a close estimate: a string counts its characters and quotes, escapes
aside), and stops with `TooLarge` as soon as the sum passes `max_bytes`, or with `TooDeep` at
the first container deeper than `max_depth`.  It stops early, so the walk costs at most
`max_bytes` steps whatever it walks: a YAML document whose aliases share one list ten million
times, or a value that contains itself, is refused after a few million steps, never expanded.

`tree_copy` then makes a value whose containers are shared (YAML aliases) into a plain tree,
so that no later in-place change to one place silently changes another.  Both are iterative:
no Python recursion, whatever the nesting.
"""

from __future__ import annotations

from typing import Any

MAX_BYTES = 3 * 1024 * 1024
"""kube-apiserver's request limit (MaxRequestBodyBytes, and JSONPatchMaxCopyBytes), here
measured on the decoded value."""

MAX_DEPTH = 100
"""Deepest nesting of a body or a patch result.  kube's decoders allow 10,000, which Python's
recursive code (merges, validation, YAML composing) cannot; real objects stay far below 100
(a Pod is about 12, a CRD's schema rarely passes 40)."""


class TooLarge(ValueError):
    """The value's JSON would be more than `limit` bytes (`at_least` were counted when the walk
    stopped)."""

    def __init__(self, at_least: int, limit: int) -> None:
        super().__init__(f"more than {limit} bytes as JSON")
        self.at_least = at_least
        self.limit = limit


class TooDeep(ValueError):
    """The value nests containers more than `limit` levels deep."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit} levels")
        self.limit = limit


def scalar_size(value: Any) -> int:
    """Compact JSON bytes of a scalar: exact for null, booleans and ASCII strings without escapes;
    numbers by their digits (never converting a huge int to text, which Python refuses)."""
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, int):
        return value.bit_length() * 3 // 10 + 2
    if isinstance(value, float):
        return 24
    if isinstance(value, bytes | bytearray):
        return len(value) * 4 // 3 + 6  # base64 in quotes
    return 32  # a YAML timestamp or another scalar type: printed as a short string


def measure(value: Any, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> int:
    """The JSON size of `value` in bytes; TooLarge past `max_bytes`, TooDeep past `max_depth`.

    Shared containers count once per place they appear, as their JSON would print them."""
    total = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > max_depth:
                raise TooDeep(max_depth)
            total += 1 + max(len(item), 1)  # braces and the commas between members
            for key, member in item.items():
                total += (len(key) + 3) if isinstance(key, str) else scalar_size(key) + 3  # quotes, colon
                stack.append((member, depth + 1))
        elif isinstance(item, list | tuple):
            if depth > max_depth:
                raise TooDeep(max_depth)
            total += 1 + max(len(item), 1)  # brackets and the commas between items
            stack.extend((member, depth + 1) for member in item)
        else:
            total += scalar_size(item)
        if total > max_bytes:
            raise TooLarge(total, max_bytes)
    return total


def tree_copy(value: Any) -> Any:
    """A copy of `value` in which no container appears twice (scalars are shared: immutable).

    Call it only on a value `measure` accepted: the copy is as large as the JSON would be."""
    if not isinstance(value, dict | list):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        if isinstance(source, dict):
            for key, member in source.items():
                if isinstance(member, dict | list):
                    child: Any = {} if isinstance(member, dict) else []
                    stack.append((member, child))
                    target[key] = child
                else:
                    target[key] = member
        else:
            for member in source:
                if isinstance(member, dict | list):
                    child = {} if isinstance(member, dict) else []
                    stack.append((member, child))
                    target.append(child)
                else:
                    target.append(member)
    return root
