"""Helpers shared by the MVCC tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from store.api.errors import StoreError
from store.mvcc import KVStore


def fingerprint(s: KVStore) -> tuple[Any, ...]:
    """Everything observable about a store, for "a refused request changed nothing"."""
    return (
        s.current_revision,
        s.compact_revision,
        s.snapshot(),
        s.hash_kv()[0],
        s.key_count(),
        s.approx_bytes(),
        [(lid, s.keys_of_lease(lid)) for lid in s.lessor.leases()],
    )


def refused(s: KVStore, err: type[StoreError], fn: Callable[[], object]) -> StoreError:
    """Call fn, expect `err`, and check that the store did not change at all."""
    before = fingerprint(s)
    with pytest.raises(err) as exc:
        fn()
    assert fingerprint(s) == before
    return exc.value
