"""Every request is decoded field by field at the edge: a wrong type or range is refused
with invalid-argument naming the field, before anything reaches the log.

The first table is the issue's list of requests that used to pass validation and then crash
every member in apply (or silently misbehave); the second walks every method."""

from __future__ import annotations

import math
from typing import Any

import pytest

from store.api import methods as M
from store.api.errors import InvalidArgumentError
from store.api.kv import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    TxnRequest,
)
from store.api.watch import WatchCreateRequest

PUT = PutRequest(b"k", b"v").to_wire()
RANGE = RangeRequest(b"k").to_wire()
DELETE = DeleteRangeRequest(b"k").to_wire()
WATCH = WatchCreateRequest(b"k").to_wire()


def with_field(wire: list[Any], i: int, value: Any) -> list[Any]:
    out = list(wire)
    out[i] = value
    return out


# (method, args, the field the error must name): what used to crash or misbehave a member.
REGRESSIONS: list[tuple[M.Method[Any, Any], Any, str]] = [
    (M.PUT, with_field(PUT, 1, None), "put.value"),  # all members crashed in apply, for good
    (M.PUT, with_field(PUT, 0, "k"), "put.key"),  # likewise
    (M.PUT, with_field(PUT, 1, "v"), "put.value"),  # was stored as a str
    (M.DELETE_RANGE, with_field(DELETE, 0, "k"), "delete_range.key"),
    (M.COMPACT, [2.5, False], "compact.revision"),
    (
        M.TXN,
        [[], [["put", with_field(PUT, 1, 7)]], []],
        "txn.success[0].put.value",
    ),
    (M.WATCH, with_field(WATCH, 0, 7), "watch.key"),  # crashed its member on the next write
    (M.WATCH, with_field(WATCH, 2, 2.5), "watch.start_revision"),  # stopped catch-up for everyone
    (M.RANGE, with_field(RANGE, 3, 1.5), "range.revision"),  # answered empty
    (M.RANGE, with_field(RANGE, 3, math.nan), "range.revision"),  # answered the latest value
]


@pytest.mark.parametrize(("method", "args", "field"), REGRESSIONS, ids=[f for _, _, f in REGRESSIONS])
def test_requests_that_crashed_members_are_refused_naming_the_field(
    method: M.Method[Any, Any], args: Any, field: str
) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        method.decode_request(args)
    assert e.value.code == "invalid-argument"
    assert e.value.details["field"] == field
    assert e.value.message.startswith(f"{field}: ")


# What each kind of bad field gets, for every method with fields.
BAD: list[tuple[M.Method[Any, Any], Any, str, str]] = [
    (M.RANGE, with_field(RANGE, 2, True), "range.limit", "expected int, got bool"),
    (M.RANGE, with_field(RANGE, 2, -1), "range.limit", "out of range"),
    (M.RANGE, with_field(RANGE, 4, 9), "range.sort_order", "not a valid SortOrder"),
    (M.RANGE, with_field(RANGE, 6, 1), "range.serializable", "expected bool, got int"),
    (M.RANGE, RANGE[:12], "range", "expected 13 fields, got 12"),
    (M.RANGE, {"key": b"k"}, "range", "expected an array, got map"),
    (M.PUT, with_field(PUT, 2, 1 << 63), "put.lease", "out of range"),
    (M.PUT, with_field(PUT, 0, b"k" * (3 << 20)), "put.key", "longer than"),
    (M.DELETE_RANGE, with_field(DELETE, 2, None), "delete_range.prev_kv", "expected bool, got nil"),
    (M.TXN, [[1], [], []], "txn.compare[0]", "expected an array, got int"),
    (
        M.TXN,
        [[Compare(CompareResult.EQUAL, CompareTarget.VALUE, b"k", 5).to_wire()], [], []],
        "txn.compare[0].value",
        "expected bytes, got int",
    ),
    (
        M.TXN,
        [[Compare(CompareResult.EQUAL, CompareTarget.MOD, b"k", b"5").to_wire()], [], []],
        "txn.compare[0].value",
        "expected int, got bytes",
    ),
    (M.TXN, [[], [["lease_grant", []]], []], "txn.success[0].kind", "unknown txn operation"),
    (M.TXN, [[], [], [["range", with_field(RANGE, 0, [])]]], "txn.failure[0].range.key", "expected bytes"),
    (M.COMPACT, [-1, False], "compact.revision", "out of range"),
    (M.LEASE_GRANT, ["10", 0], "lease_grant.ttl", "expected int, got str"),
    (M.LEASE_REVOKE, [1.0], "lease.id", "expected int, got float"),
    (M.LEASE_KEEPALIVE, [], "lease", "expected 1 fields, got 0"),
    (M.LEASE_TTL, [1, "yes"], "lease_ttl.keys", "expected bool, got str"),
    (M.STATUS, [1], "request", "expected 0 fields, got 1"),
    (M.MEMBER_ADD, ["m4", "nowhere", "tcp://h:1", "http://h:2", True], "member_add.peer_url", "host:port"),
    (M.MEMBER_UPDATE, [4, "m4", "tcp://h:1", "nowhere", "http://h:3"], "member_update.client_url", "host:port"),
    (M.MEMBER_UPDATE, [0, "m4", "tcp://h:1", "tcp://h:2", "http://h:3"], "member_update.id", ""),
    (M.MEMBER_REMOVE, [0], "member.id", "out of range"),
    (M.MOVE_LEADER, [True], "member.id", "expected int, got bool"),
    (M.HASH_KV, [b"1"], "hash_kv.revision", "expected int, got bytes"),
    (M.WATCH, with_field(WATCH, 4, [0, 1, 0]), "watch.filters", "more than 2 items"),
    (M.WATCH, with_field(WATCH, 4, [5]), "watch.filters[0]", "out of range"),
    (M.WATCH, with_field(WATCH, 6, -2), "watch.watch_id", "out of range"),
    (M.WATCH_CANCEL, ["1"], "watch.watch_id", "expected int, got str"),
    (M.HELLO, [7], "hello.protocol", "expected str, got int"),
]


@pytest.mark.parametrize(("method", "args", "field", "says"), BAD, ids=[f"{m.name}:{f}" for m, _, f, _ in BAD])
def test_each_bad_field_gets_invalid_argument_naming_it(
    method: M.Method[Any, Any], args: Any, field: str, says: str
) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        method.decode_request(args)
    assert e.value.details["field"] == field
    assert says in e.value.message, e.value.message


def test_nested_txns_are_bounded_in_depth() -> None:
    req: Any = [[], [], []]
    for _ in range(40):
        req = [[], [["txn", req]], []]
    with pytest.raises(InvalidArgumentError) as e:
        M.TXN.decode_request(req)
    assert "nested deeper than" in e.value.message


def test_well_formed_requests_decode_to_what_was_encoded() -> None:
    txn = TxnRequest(
        [Compare(CompareResult.GREATER, CompareTarget.MOD, b"a", 3)],
        [PutRequest(b"a", b"1", prev_kv=True), TxnRequest([], [DeleteRangeRequest(b"b", b"c")], [])],
        [RangeRequest(b"a", b"\0", limit=5)],
    )
    assert M.TXN.decode_request(txn.to_wire()) == txn
    assert M.WATCH.decode_request(WATCH) == WatchCreateRequest(b"k")
