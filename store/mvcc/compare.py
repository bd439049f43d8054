"""Txn compares, evaluated exactly as etcd's applyCompare/compareKV do."""

from __future__ import annotations

from store.api.kv import Compare, CompareResult, CompareTarget, KeyValue

_MISSING = KeyValue(b"", 0, 0, 0, b"", 0)
"""What a compare sees for a missing key: every revision, version and lease is 0."""


def compare_kv(c: Compare, kv: KeyValue) -> bool:
    target = c.target
    value = c.value
    a: int | bytes
    if target is CompareTarget.VALUE:
        a = kv.value
    elif target is CompareTarget.VERSION:
        a = kv.version
    elif target is CompareTarget.MOD:
        a = kv.mod_revision
    elif target is CompareTarget.CREATE:
        a = kv.create_revision
    else:
        a = kv.lease
    result = c.result
    if result is CompareResult.EQUAL:
        return a == value
    if result is CompareResult.NOT_EQUAL:
        return a != value
    if result is CompareResult.GREATER:
        return a > value  # type: ignore[operator]  # validated: same type
    return a < value  # type: ignore[operator]


def compare_all(c: Compare, kvs: list[KeyValue]) -> bool:
    """A compare over a range holds when it holds for every key in it.  No key at all: a VALUE
    compare fails (etcd cannot tell a missing value from an empty one), the others compare
    against zeros."""
    if not kvs:
        return c.target is not CompareTarget.VALUE and compare_kv(c, _MISSING)
    return all(compare_kv(c, kv) for kv in kvs)
