"""KVStore: etcd v3 semantics, one behaviour per test (values checked against etcd 3.4 by hand
where noted; tests/store/mvcc/test_etcd_differential.py checks them against a running etcd)."""

from __future__ import annotations

import pytest

from store.api.errors import (
    CompactedError,
    DuplicateKeyError,
    FutureRevisionError,
    InvalidArgumentError,
    InvalidRangeError,
    KeyEmptyError,
    KeyNotFoundError,
    LeaseNotFoundError,
    TooManyOpsError,
)
from store.api.kv import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    EventType,
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    RequestOp,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
    prefix_end,
)
from store.mvcc import KVStore
from tests.store.mvcc.util import fingerprint, refused

ALL = b"\0"


def put(s: KVStore, key: bytes, value: bytes = b"v", lease: int = 0) -> int:
    return s.put(PutRequest(key, value, lease))[0].revision


def get(s: KVStore, key: bytes, end: bytes = b"", **kw: object) -> RangeResponse:
    return s.range(RangeRequest(key, end, **kw))  # type: ignore[arg-type]


def keys(r: RangeResponse) -> list[bytes]:
    return [kv.key for kv in r.kvs]


def cmp(target: CompareTarget, result: CompareResult, key: bytes, value: int | bytes, end: bytes = b"") -> Compare:
    return Compare(result, target, key, value, end)


# ---------------------------------------------------------------------- revisions and puts
def test_empty_store_is_at_revision_1() -> None:
    s = KVStore()
    assert s.current_revision == 1
    assert s.compact_revision == 0
    assert get(s, b"a") == RangeResponse(1, [], False, 0)


def test_put_sets_create_mod_version() -> None:
    s = KVStore()
    assert put(s, b"a", b"1") == 2
    assert put(s, b"b") == 3
    assert put(s, b"a", b"2") == 4
    assert get(s, b"a").kvs == [KeyValue(b"a", 2, 4, 2, b"2")]


def test_put_of_the_same_value_still_bumps_the_revision() -> None:
    s = KVStore()
    put(s, b"a", b"x")
    resp, events = s.put(PutRequest(b"a", b"x"))
    assert resp.revision == 3
    assert events[0].kv == KeyValue(b"a", 2, 3, 2, b"x")


def test_delete_resets_version_and_a_new_put_starts_a_generation() -> None:
    s = KVStore()
    put(s, b"a")
    put(s, b"a")
    s.delete_range(DeleteRangeRequest(b"a"))
    assert put(s, b"a", b"new") == 5
    assert get(s, b"a").kvs == [KeyValue(b"a", 5, 5, 1, b"new")]
    assert get(s, b"a", revision=3).kvs == [KeyValue(b"a", 2, 3, 2, b"v")]
    assert get(s, b"a", revision=4).kvs == []


def test_put_prev_kv_ignore_value_ignore_lease() -> None:
    s = KVStore()
    s.lessor.grant(7, 100, 0.0)
    put(s, b"a", b"old", lease=7)
    resp, _ = s.put(PutRequest(b"a", b"", prev_kv=True, ignore_value=True, ignore_lease=True))
    assert resp == PutResponse(3, KeyValue(b"a", 2, 2, 1, b"old", 7))
    assert get(s, b"a").kvs == [KeyValue(b"a", 2, 3, 2, b"old", 7)]
    resp, _ = s.put(PutRequest(b"a", b"new", ignore_lease=True))
    assert get(s, b"a").kvs == [KeyValue(b"a", 2, 4, 3, b"new", 7)]
    assert resp.prev_kv is None  # not asked for


def test_put_events_carry_prev_kv() -> None:
    s = KVStore()
    _, ev1 = s.put(PutRequest(b"a", b"1"))
    _, ev2 = s.put(PutRequest(b"a", b"2"))
    assert ev1[0].prev_kv is None
    assert ev2[0].prev_kv is ev1[0].kv  # shared, not copied
    assert ev2[0].type is EventType.PUT


@pytest.mark.parametrize(
    ("req", "err"),
    [
        (PutRequest(b""), KeyEmptyError),
        (PutRequest(b"a", b"x", ignore_value=True), InvalidArgumentError),
        (PutRequest(b"a", lease=5, ignore_lease=True), InvalidArgumentError),
        (PutRequest(b"missing", ignore_value=True), KeyNotFoundError),
        (PutRequest(b"missing", ignore_lease=True), KeyNotFoundError),
        (PutRequest(b"a", lease=99), LeaseNotFoundError),
        (PutRequest(b"missing", lease=99, ignore_value=True), LeaseNotFoundError),  # etcd: lease first
    ],
)
def test_refused_puts_change_nothing(req: PutRequest, err: type[Exception]) -> None:
    s = KVStore()
    put(s, b"a")
    refused(s, err, lambda: s.put(req))  # type: ignore[arg-type]


# ---------------------------------------------------------------------- ranges
def _abc() -> KVStore:
    s = KVStore()
    put(s, b"a", b"2")  # 2
    put(s, b"b", b"1")  # 3
    put(s, b"a", b"2")  # 4: a version 2
    put(s, b"c", b"0")  # 5
    return s


def test_range_forms() -> None:
    s = _abc()
    assert keys(get(s, b"a")) == [b"a"]
    assert keys(get(s, b"a", b"c")) == [b"a", b"b"]
    assert keys(get(s, b"b", ALL)) == [b"b", b"c"]
    assert keys(get(s, b"\0", ALL)) == [b"a", b"b", b"c"]
    assert keys(get(s, b"a", prefix_end(b"a"))) == [b"a"]
    assert get(s, b"b", b"b") == RangeResponse(5, [], False, 0)  # range_end == key: empty, as in etcd
    assert get(s, b"a", b"c").revision == 5


def test_refused_ranges() -> None:
    s = _abc()
    refused(s, KeyEmptyError, lambda: get(s, b""))
    refused(s, InvalidRangeError, lambda: get(s, b"c", b"a"))  # etcd: empty result; raftkube refuses
    assert refused(s, FutureRevisionError, lambda: get(s, b"a", revision=6)).current_revision == 5  # type: ignore[attr-defined]


def test_range_limit_more_count() -> None:
    s = _abc()
    r = get(s, b"a", ALL, limit=2)
    assert (keys(r), r.more, r.count) == ([b"a", b"b"], True, 3)
    r = get(s, b"a", ALL, limit=3)
    assert (keys(r), r.more, r.count) == ([b"a", b"b", b"c"], False, 3)
    r = get(s, b"a", ALL, limit=-1)  # negative: no limit
    assert (len(r.kvs), r.more) == (3, False)


def test_count_only_and_keys_only() -> None:
    s = _abc()
    assert get(s, b"a", ALL, count_only=True, limit=1) == RangeResponse(5, [], False, 3)
    r = get(s, b"a", ALL, keys_only=True, limit=1)
    assert r.kvs == [KeyValue(b"a", 2, 4, 2, b"")]
    assert (r.more, r.count) == (True, 3)
    assert get(s, b"a").kvs[0].value == b"2"  # the stored value was not touched


@pytest.mark.parametrize(
    ("order", "target", "expected"),
    [
        (SortOrder.ASCEND, SortTarget.KEY, [b"a", b"b", b"c"]),
        (SortOrder.DESCEND, SortTarget.KEY, [b"c", b"b", b"a"]),
        (SortOrder.ASCEND, SortTarget.VERSION, [b"b", b"c", b"a"]),  # ties stay in key order
        (SortOrder.DESCEND, SortTarget.VERSION, [b"a", b"b", b"c"]),
        (SortOrder.ASCEND, SortTarget.CREATE, [b"a", b"b", b"c"]),
        (SortOrder.DESCEND, SortTarget.MOD, [b"c", b"a", b"b"]),
        (SortOrder.ASCEND, SortTarget.VALUE, [b"c", b"b", b"a"]),
        (SortOrder.NONE, SortTarget.VALUE, [b"c", b"b", b"a"]),  # target without order: ascend
        (SortOrder.NONE, SortTarget.KEY, [b"a", b"b", b"c"]),
    ],
)
def test_sort(order: SortOrder, target: SortTarget, expected: list[bytes]) -> None:
    assert keys(get(_abc(), b"a", ALL, sort_order=order, sort_target=target)) == expected


def test_implicit_sort_applies_to_the_first_limit_plus_one_keys_only() -> None:
    # etcd 3.4 fetches limit + 1 keys in key order when sort_order is NONE, then sorts them.
    s = KVStore()
    for k, v in [(b"a", b"9"), (b"b", b"8"), (b"c", b"7"), (b"d", b"1")]:
        put(s, k, v)
    r = get(s, b"a", ALL, limit=2, sort_target=SortTarget.VALUE)
    assert (keys(r), r.more, r.count) == ([b"c", b"b"], True, 4)  # d (the smallest) was never fetched
    r = get(s, b"a", ALL, limit=2, sort_target=SortTarget.VALUE, sort_order=SortOrder.ASCEND)
    assert keys(r) == [b"d", b"c"]  # an explicit order sorts everything first


def test_revision_filters_prune_but_count_counts_everything() -> None:
    s = _abc()
    r = get(s, b"a", ALL, min_mod_revision=4)
    assert (keys(r), r.count) == ([b"a", b"c"], 3)
    r = get(s, b"a", ALL, max_mod_revision=3)
    assert keys(r) == [b"b"]
    r = get(s, b"a", ALL, min_create_revision=3, max_create_revision=4, limit=1)
    assert (keys(r), r.more, r.count) == ([b"b"], False, 3)


def test_historical_ranges() -> None:
    s = _abc()
    s.delete_range(DeleteRangeRequest(b"b"))
    assert keys(get(s, b"a", ALL, revision=3)) == [b"a", b"b"]
    assert get(s, b"a", ALL, revision=3).kvs[0] == KeyValue(b"a", 2, 2, 1, b"2")
    assert get(s, b"a", ALL, revision=3).revision == 6  # the header is the current revision
    assert keys(get(s, b"a", ALL)) == [b"a", b"c"]
    assert keys(get(s, b"a", ALL, revision=-3)) == [b"a", b"c"]  # <= 0: current
    assert get(s, b"a", ALL, revision=1).kvs == []


# ---------------------------------------------------------------------- deletes
def test_delete_range_and_prev_kv() -> None:
    s = _abc()
    resp, events = s.delete_range(DeleteRangeRequest(b"a", b"c", prev_kv=True))
    assert resp == DeleteRangeResponse(6, 2, [KeyValue(b"a", 2, 4, 2, b"2"), KeyValue(b"b", 3, 3, 1, b"1")])
    assert [(e.type, e.kv) for e in events] == [
        (EventType.DELETE, KeyValue(b"a", 0, 6, 0, b"")),
        (EventType.DELETE, KeyValue(b"b", 0, 6, 0, b"")),
    ]
    assert events[0].prev_kv == KeyValue(b"a", 2, 4, 2, b"2")
    assert s.key_count() == 1


def test_delete_of_nothing_does_not_bump_the_revision() -> None:
    s = _abc()
    before = fingerprint(s)
    resp, events = s.delete_range(DeleteRangeRequest(b"x", ALL))
    assert (resp, events) == (DeleteRangeResponse(5, 0, []), [])
    assert fingerprint(s) == before


def test_refused_deletes() -> None:
    s = _abc()
    refused(s, KeyEmptyError, lambda: s.delete_range(DeleteRangeRequest(b"")))
    refused(s, InvalidRangeError, lambda: s.delete_range(DeleteRangeRequest(b"c", b"a")))


# ---------------------------------------------------------------------- txns
def test_txn_compares_every_target_and_result() -> None:
    s = _abc()
    s.lessor.grant(9, 100, 0.0)
    put(s, b"l", lease=9)  # 6
    V, C, M = CompareTarget.VERSION, CompareTarget.CREATE, CompareTarget.MOD
    VAL, L = CompareTarget.VALUE, CompareTarget.LEASE
    EQ, NE, GT, LT = CompareResult.EQUAL, CompareResult.NOT_EQUAL, CompareResult.GREATER, CompareResult.LESS
    cases = [
        (cmp(V, EQ, b"a", 2), True),
        (cmp(V, GT, b"a", 2), False),
        (cmp(C, LT, b"b", 4), True),
        (cmp(M, NE, b"a", 4), False),
        (cmp(VAL, EQ, b"c", b"0"), True),
        (cmp(VAL, GT, b"c", b""), True),
        (cmp(L, EQ, b"l", 9), True),
        (cmp(L, EQ, b"a", 0), True),
        (cmp(V, EQ, b"missing", 0), True),  # a missing key compares as zeros
        (cmp(C, EQ, b"missing", 0), True),
        (cmp(VAL, NE, b"missing", b"x"), False),  # ... but every VALUE compare on it fails
        (cmp(V, GT, b"a", 0, b"d"), True),  # a range: every key must match
        (cmp(M, GT, b"a", 3, b"d"), False),  # b has mod 3
        (cmp(V, EQ, b"x", 0, b"z"), True),  # an empty range compares as zeros
        (cmp(VAL, EQ, b"x", b"", b"z"), False),
    ]
    for c, ok in cases:
        resp, events = s.txn(TxnRequest([c]))
        assert resp == TxnResponse(6, ok, []), c
        assert events == []
    assert s.current_revision == 6


def test_txn_reads_see_earlier_writes_and_revisions_follow_etcd() -> None:
    s = _abc()
    req = TxnRequest(
        [cmp(CompareTarget.VERSION, CompareResult.EQUAL, b"b", 1)],
        [
            RangeRequest(b"b"),
            PutRequest(b"n", b"v"),
            RangeRequest(b"n"),
            DeleteRangeRequest(b"nope"),
            TxnRequest([], [RangeRequest(b"n")]),
        ],
    )
    resp, events = s.txn(req)
    n = KeyValue(b"n", 6, 6, 1, b"v")
    assert resp == TxnResponse(
        6,
        True,
        [
            RangeResponse(5, [KeyValue(b"b", 3, 3, 1, b"1")], False, 1),  # before the write: 5
            PutResponse(6),
            RangeResponse(6, [n], False, 1),
            DeleteRangeResponse(6, 0),  # nothing deleted, but the txn already wrote: 6
            TxnResponse(0, True, [RangeResponse(6, [n], False, 1)]),  # nested: no revision, as in etcd
        ],
    )
    assert [e.kv for e in events] == [n]


def test_txn_without_effective_writes_does_not_bump() -> None:
    s = _abc()
    before = fingerprint(s)
    resp, events = s.txn(TxnRequest([], [DeleteRangeRequest(b"nope"), RangeRequest(b"b")]))
    assert resp.revision == 5
    assert resp.responses[0] == DeleteRangeResponse(5, 0)
    assert events == []
    assert fingerprint(s) == before


def test_txn_failure_branch_and_one_revision_for_all_writes() -> None:
    s = _abc()
    req = TxnRequest(
        [cmp(CompareTarget.VALUE, CompareResult.EQUAL, b"a", b"nope")],
        [PutRequest(b"x")],
        [PutRequest(b"y", b"1"), DeleteRangeRequest(b"a", b"c", prev_kv=True), PutRequest(b"z", b"2")],
    )
    resp, events = s.txn(req)
    assert not resp.succeeded
    assert resp.revision == 6
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in events] == [
        (EventType.PUT, b"y", 6),
        (EventType.DELETE, b"a", 6),
        (EventType.DELETE, b"b", 6),
        (EventType.PUT, b"z", 6),
    ]
    assert s.events_between(6, 7) == events  # one revision, in sub-revision order


def test_nested_compares_see_the_state_before_the_txn() -> None:
    s = KVStore()
    missing_m = cmp(CompareTarget.VERSION, CompareResult.EQUAL, b"m", 0)
    inner = TxnRequest([missing_m], [PutRequest(b"m2", b"yes")], [PutRequest(b"m2", b"no")])
    resp, _ = s.txn(TxnRequest([], [PutRequest(b"m", b"v"), inner]))
    assert resp.responses[1] == TxnResponse(0, True, [PutResponse(2)])
    assert get(s, b"m2").kvs[0].value == b"yes"


def test_txn_checks_only_the_executed_branch() -> None:
    s = _abc()
    # The failure branch would fail (ignore_value on a missing key) but does not run.
    resp, _ = s.txn(TxnRequest([], [RangeRequest(b"a")], [PutRequest(b"missing", ignore_value=True)]))
    assert resp.succeeded
    ignoring = PutRequest(b"missing", ignore_value=True)
    refused(s, KeyNotFoundError, lambda: s.txn(TxnRequest([], [PutRequest(b"ok"), ignoring])))
    refused(s, LeaseNotFoundError, lambda: s.txn(TxnRequest([], [PutRequest(b"ok"), PutRequest(b"k", lease=3)])))
    refused(s, FutureRevisionError, lambda: s.txn(TxnRequest([], [PutRequest(b"ok"), RangeRequest(b"a", revision=6)])))
    # etcd checks every put on the path before any range
    refused(
        s,
        KeyNotFoundError,
        lambda: s.txn(TxnRequest([], [RangeRequest(b"a", revision=99), PutRequest(b"missing", ignore_value=True)])),
    )
    s.compact(4)
    refused(s, CompactedError, lambda: s.txn(TxnRequest([], [PutRequest(b"ok"), RangeRequest(b"a", revision=3)])))
    resp, _ = s.txn(TxnRequest([], [RangeRequest(b"a", revision=4)]))  # at the compaction point: fine
    assert resp.responses[0].kvs  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "req",
    [
        TxnRequest([], [PutRequest(b"x"), PutRequest(b"x")]),
        TxnRequest([], [PutRequest(b"b"), DeleteRangeRequest(b"a", b"c")]),
        TxnRequest([], [DeleteRangeRequest(b"a", b"c"), PutRequest(b"b")]),
        TxnRequest([], [], [DeleteRangeRequest(b"b"), PutRequest(b"b")]),
        TxnRequest([], [PutRequest(b"b"), TxnRequest([], [PutRequest(b"b")])]),
        TxnRequest([], [TxnRequest([], [], [PutRequest(b"b")]), DeleteRangeRequest(b"a", b"c")]),
        TxnRequest([], [DeleteRangeRequest(b"a", b"c"), TxnRequest([], [PutRequest(b"b")])]),
        # two cases etcd 3.4 lets through (a key would change twice in one revision):
        TxnRequest([], [TxnRequest([], [PutRequest(b"s")]), TxnRequest([], [DeleteRangeRequest(b"s")])]),
        TxnRequest([], [PutRequest(b"t"), DeleteRangeRequest(b"r", ALL)]),
    ],
)
def test_duplicate_writes_in_a_txn_are_refused(req: TxnRequest) -> None:
    s = _abc()
    refused(s, DuplicateKeyError, lambda: s.txn(req))


def test_allowed_overlaps() -> None:
    s = _abc()
    # two deletes may overlap; then/else of one nested txn exclude each other
    s.txn(TxnRequest([], [DeleteRangeRequest(b"a", b"c"), DeleteRangeRequest(b"b", ALL)]))
    assert keys(get(s, b"a", ALL)) == []
    s.txn(TxnRequest([], [TxnRequest([], [PutRequest(b"k", b"1")], [PutRequest(b"k", b"2")])]))
    assert get(s, b"k").kvs[0].value == b"1"


def test_too_many_ops() -> None:
    s = _abc()
    ok = TxnRequest([], [RangeRequest(b"a")] * 128)
    s.txn(ok)
    refused(s, TooManyOpsError, lambda: s.txn(TxnRequest([], [RangeRequest(b"a")] * 129)))
    compares = [cmp(CompareTarget.VERSION, CompareResult.EQUAL, b"a", 0)] * 129
    refused(s, TooManyOpsError, lambda: s.txn(TxnRequest(compares)))
    # a nested txn gets what its parent leaves: 128 - 3
    nested: list[RequestOp] = [TxnRequest([], [RangeRequest(b"a")] * 125), RangeRequest(b"a"), RangeRequest(b"a")]
    s.txn(TxnRequest([], nested))
    nested[0] = TxnRequest([], [RangeRequest(b"a")] * 126)
    refused(s, TooManyOpsError, lambda: s.txn(TxnRequest([], nested)))


def test_refused_txns_with_bad_parts() -> None:
    s = _abc()
    V, EQ = CompareTarget.VERSION, CompareResult.EQUAL
    refused(s, KeyEmptyError, lambda: s.txn(TxnRequest([cmp(V, EQ, b"", 0)])))
    refused(s, KeyEmptyError, lambda: s.txn(TxnRequest([], [PutRequest(b"ok"), PutRequest(b"")])))
    refused(s, KeyEmptyError, lambda: s.txn(TxnRequest([], [], [TxnRequest([], [RangeRequest(b"")])])))
    refused(s, InvalidRangeError, lambda: s.txn(TxnRequest([cmp(V, EQ, b"b", 0, b"a")])))
    refused(s, InvalidRangeError, lambda: s.txn(TxnRequest([], [PutRequest(b"ok"), DeleteRangeRequest(b"b", b"a")])))
    refused(s, InvalidArgumentError, lambda: s.txn(TxnRequest([cmp(CompareTarget.VALUE, EQ, b"a", 3)])))
    refused(s, InvalidArgumentError, lambda: s.txn(TxnRequest([cmp(V, EQ, b"a", b"3")])))
    both = PutRequest(b"a", b"x", ignore_value=True)
    refused(s, InvalidArgumentError, lambda: s.txn(TxnRequest([], [PutRequest(b"ok"), both])))


# ---------------------------------------------------------------------- compaction
def test_compaction_errors_follow_etcd() -> None:
    s = KVStore()
    s.compact(0)  # allowed once on a fresh store, as in etcd
    refused(s, CompactedError, lambda: s.compact(0))
    refused(s, FutureRevisionError, lambda: s.compact(2))
    s.compact(1)
    assert refused(s, CompactedError, lambda: s.compact(1)).compact_revision == 1  # type: ignore[attr-defined]


def test_compaction_removes_history_and_keeps_the_compaction_point_readable() -> None:
    s = _abc()
    s.delete_range(DeleteRangeRequest(b"b"))  # 6
    put(s, b"a", b"3")  # 7
    s.compact(6)
    assert s.compact_revision == 6
    assert keys(get(s, b"a", ALL, revision=6)) == [b"a", b"c"]
    assert get(s, b"a", revision=6).kvs[0].mod_revision == 4
    err = refused(s, CompactedError, lambda: get(s, b"a", ALL, revision=5))
    assert err.compact_revision == 6  # type: ignore[attr-defined]
    assert s._index.get(b"b") is None  # its tombstone was the newest change: gone
    assert s._index.get(b"a").revs == [4, 7]  # type: ignore[union-attr]
    refused(s, CompactedError, lambda: s.events_between(6, 8))
    assert [e.kv.key for e in s.events_between(7, 8)] == [b"a"]
    s.compact(7)
    assert s._index.get(b"a").revs == [7]  # type: ignore[union-attr]


# ---------------------------------------------------------------------- history
def test_events_between_orders_filters_and_limits_by_whole_revisions() -> None:
    s = KVStore()
    s.txn(TxnRequest([], [PutRequest(b"a"), PutRequest(b"b"), PutRequest(b"c")]))  # 2
    put(s, b"b")  # 3
    s.delete_range(DeleteRangeRequest(b"a", ALL))  # 4
    evs = s.events_between(1, 100)
    assert [(e.kv.mod_revision, e.type, e.kv.key) for e in evs] == [
        (2, EventType.PUT, b"a"),
        (2, EventType.PUT, b"b"),
        (2, EventType.PUT, b"c"),
        (3, EventType.PUT, b"b"),
        (4, EventType.DELETE, b"a"),
        (4, EventType.DELETE, b"b"),
        (4, EventType.DELETE, b"c"),
    ]
    assert [e.kv.mod_revision for e in s.events_between(3, 4)] == [3]
    assert [e.kv.key for e in s.events_between(2, 5, b"b")] == [b"b", b"b", b"b"]
    assert [e.kv.key for e in s.events_between(2, 5, b"b", ALL)] == [b"b", b"c", b"b", b"b", b"c"]
    assert len(s.events_between(2, 5, limit=2)) == 3  # revision 2 is not split
    assert len(s.events_between(2, 5, limit=4)) == 4
    assert s.events_between(5, 10) == []
    assert evs[4].prev_kv is not None and evs[4].prev_kv.mod_revision == 2


# ---------------------------------------------------------------------- leases
def test_lease_attachment_follows_puts_and_deletes() -> None:
    s = KVStore()
    s.lessor.grant(1, 60, 0.0)
    s.lessor.grant(2, 60, 0.0)
    put(s, b"a", lease=1)
    put(s, b"b", lease=1)
    put(s, b"c", lease=2)
    assert s.keys_of_lease(1) == [b"a", b"b"]
    put(s, b"b", lease=2)  # moves to lease 2
    put(s, b"c")  # detached
    s.delete_range(DeleteRangeRequest(b"a"))
    assert s.keys_of_lease(1) == []
    assert s.keys_of_lease(2) == [b"b"]


def test_revoke_deletes_every_key_of_the_lease_in_one_revision() -> None:
    s = KVStore()
    s.lessor.grant(1, 60, 0.0)
    for k in (b"c", b"a", b"b"):
        put(s, k, lease=1)
    put(s, b"other")
    rev, events = s.revoke_lease_keys(1)
    assert rev == 6
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in events] == [
        (EventType.DELETE, b"a", 6),
        (EventType.DELETE, b"b", 6),
        (EventType.DELETE, b"c", 6),
    ]
    assert keys(get(s, b"\0", ALL)) == [b"other"]
    assert not s.lessor.exists(1)
    refused(s, LeaseNotFoundError, lambda: s.revoke_lease_keys(1))


def test_revoke_of_a_lease_without_keys_does_not_bump() -> None:
    s = KVStore()
    s.lessor.grant(1, 60, 0.0)
    assert s.revoke_lease_keys(1) == (1, [])
    assert s.current_revision == 1


# ---------------------------------------------------------------------- hash and snapshot
def test_hash_covers_history_not_just_the_live_state() -> None:
    a, b = KVStore(), KVStore()
    put(a, b"k", b"1")
    put(a, b"k", b"2")
    put(b, b"k", b"2")
    put(b, b"k", b"2")
    assert a.current_revision == b.current_revision
    assert a.hash_kv()[0] != b.hash_kv()[0]
    assert a.hash_kv(2) != b.hash_kv(2)
    c = KVStore()
    put(c, b"k", b"1")
    assert c.hash_kv() == a.hash_kv(2)
    with pytest.raises(FutureRevisionError):
        a.hash_kv(4)
    a.compact(2)
    with pytest.raises(CompactedError):
        a.hash_kv(2)
    assert a.hash_kv() == (a.hash_kv(3)[0], 2)


def test_snapshot_round_trip_with_compaction_and_leases() -> None:
    s = _abc()
    s.lessor.grant(5, 30, 0.0)
    s.lessor.grant(6, 40, 0.0)
    put(s, b"l1", lease=5)
    put(s, b"l2", lease=5)
    s.delete_range(DeleteRangeRequest(b"b"))
    s.compact(7)
    put(s, b"a", b"after")
    s.txn(TxnRequest([], [PutRequest(b"l1", b"x", ignore_lease=True), DeleteRangeRequest(b"c")]))
    t = KVStore.restore(s.snapshot())
    assert fingerprint(t) == fingerprint(s)
    assert t.events_between(8, 100) == s.events_between(8, 100)
    assert t.lessor.entries() == [(5, 30), (6, 40)]
    assert t.keys_of_lease(5) == [b"l1", b"l2"]
    assert get(t, b"\0", ALL, revision=7) == get(s, b"\0", ALL, revision=7)
    with pytest.raises(CompactedError):
        get(t, b"a", revision=6)
    # the restored store keeps working identically
    for st in (s, t):
        put(st, b"new")
        st.compact(9)
    assert fingerprint(t) == fingerprint(s)


def test_snapshot_of_a_fully_compacted_and_an_empty_store() -> None:
    s = _abc()
    s.compact(5)
    t = KVStore.restore(s.snapshot())
    assert fingerprint(t) == fingerprint(s)
    e = KVStore()
    assert fingerprint(KVStore.restore(e.snapshot())) == fingerprint(e)
    with pytest.raises(ValueError, match="not a raftkube KV snapshot"):
        KVStore.restore(b"\x93\x07\x01\x02")


def test_metrics_counters() -> None:
    s = _abc()
    assert (s.key_count(), s.approx_bytes()) == (3, 6)
    s.delete_range(DeleteRangeRequest(b"a"))
    put(s, b"b", b"1234")
    assert (s.key_count(), s.approx_bytes()) == (2, 1 + 4 + 1 + 1)
