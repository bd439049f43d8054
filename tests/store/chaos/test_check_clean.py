"""A clean history of every kind of operation passes every check."""

from __future__ import annotations

from store.api.kv import (
    Compare,
    CompareResult,
    CompareTarget,
    PutRequest,
    RangeRequest,
    TxnRequest,
)
from store.chaos.check import check_history
from store.chaos.history import FAIL, UNKNOWN, History
from tests.store.chaos.builder import Builder


def clean_history() -> tuple[Builder, History]:
    b = Builder()
    b.put(b"a", b"v1", client=1)
    b.put(b"b", b"v2", client=2, prev_kv=True)
    b.get(b"a")
    b.read(RangeRequest(b"a", b"c"), client=3)
    b.put(b"a", b"v3", client=1, prev_kv=True)
    b.txn(
        TxnRequest(
            [Compare(CompareResult.EQUAL, CompareTarget.VALUE, b"a", b"v3")],
            [PutRequest(b"c", b"v4")],
            [PutRequest(b"c", b"v5")],
        ),
        client=2,
    )
    b.txn(  # fails its compare and its branch only reads: no revision of its own
        TxnRequest(
            [Compare(CompareResult.EQUAL, CompareTarget.VERSION, b"zz", 3)],
            [PutRequest(b"c", b"v6")],
            [RangeRequest(b"c")],
        ),
        client=1,
    )
    b.delete(b"b", client=2)
    b.delete(b"b", client=2)  # nothing left to delete
    b.put(b"a", b"v7", client=1, outcome=UNKNOWN)  # timed out, but applied
    b.put(b"a", b"v8", client=4, outcome=UNKNOWN, applied=False)  # timed out, never applied
    b.put(b"a", b"v9", client=5, outcome=FAIL, applied=False)
    b.read(RangeRequest(b"a", revision=3), client=2)
    b.read(RangeRequest(b"a", serializable=True), client=6, endpoint="m1")
    b.grant(10, 5)
    b.put(b"l", b"v10", lease=10, client=3)
    b.keepalive(10, 5)
    b.get(b"l", client=2)
    b.expire(10, at=b.t + 5.5)
    b.get(b"l", client=2)
    b.grant(11, 5)
    b.put(b"m", b"v11", lease=11, client=3)
    b.revoke(11)
    b.compact(4, client=1)
    b.delete(b"a", b"b", prev_kv=True, client=1)
    b.get(b"a", client=2)
    b.watch(b"a", b"z", start=2, prev_kv=True)
    b.watch(b"c", start=3)
    b.watch(b"\0", b"\0", start=1, full_history_of=1)
    b.watch(b"\0", b"\0", start=1, full_history_of=2)
    return b, b.finish()


def test_clean_history_has_no_violation() -> None:
    _, history = clean_history()
    assert check_history(history) == []


def test_empty_history_has_no_violation() -> None:
    assert check_history(History()) == []
