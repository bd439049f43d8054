"""Applying a committed entry never raises: whatever got into the log, every member gives the
same typed error for it, changes nothing, and goes on applying what follows."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.api import errors as E
from store.api.cluster import MemberInfo
from store.api.kv import PutRequest, RangeRequest
from store.raft.types import ConfChange, ConfChangeType
from store.server.state import ReplicatedState

MEMBERS = [MemberInfo(i, f"m{i}", f"tcp://127.0.0.1:{7000 + i}", f"tcp://127.0.0.1:{8000 + i}", "") for i in (1, 2, 3)]


def new_state() -> ReplicatedState:
    return ReplicatedState.new(42, 1, MEMBERS)


def entry(kind: str, args: Any, origin: int = 1, seq: int = 7) -> bytes:
    data: bytes = msgpack.packb([origin, seq, kind, args], use_bin_type=True)
    return data


PUT = PutRequest(b"k", b"v").to_wire()

# (entry bytes, the error's code, what its message says): entries the old apply raised on.
BAD_ENTRIES = [
    (entry("put", [b"k", None, 0, False, False, False]), "invalid-argument", "put.value"),
    (entry("put", ["k", b"v", 0, False, False, False]), "invalid-argument", "put.key"),
    (entry("delete_range", ["k", b"", False]), "invalid-argument", "delete_range.key"),
    (entry("compact", [2.5, False]), "invalid-argument", "compact.revision"),
    (entry("txn", [[], [["put", [b"k", 7, 0, False, False, False]]], []]), "invalid-argument", "put.value"),
    (entry("lease_grant", [1, "10"]), "invalid-argument", "lease_grant.ttl"),
    (entry("lease_revoke", []), "invalid-argument", "lease_revoke"),
    (entry("no_such_kind", []), "invalid-argument", "unknown entry kind"),
    (entry("put", PUT[:5]), "invalid-argument", "expected 6 fields"),
]


@pytest.mark.parametrize(("data", "code", "says"), BAD_ENTRIES, ids=[s for _, _, s in BAD_ENTRIES])
def test_a_malformed_entry_is_refused_and_changes_nothing(data: bytes, code: str, says: str) -> None:
    s = new_state()
    before = s.snapshot()
    origin, seq, result = s.apply(data, 5, now=0.0)
    assert (origin, seq) == (1, 7), "the proposer still gets its answer"
    assert isinstance(result, E.StoreError) and result.code == code
    assert says in result.message
    assert s.applied_index == 5
    assert s.snapshot() == before
    # ... and the member goes on: the next entry applies normally.
    assert not isinstance(s.apply(entry("put", PUT), 6, now=0.0)[2], E.StoreError)
    assert s.kv.range(RangeRequest(b"k")).kvs[0].value == b"v"


@pytest.mark.parametrize("data", [b"", b"\xc1", b"not msgpack at all", msgpack.packb({"a": 1}), msgpack.packb([1, 2])])
def test_an_entry_without_an_envelope_is_skipped_and_nobody_is_answered(data: bytes) -> None:
    s = new_state()
    origin, seq, result = s.apply(data, 3, now=0.0)
    assert (origin, seq) == (0, 0)
    assert isinstance(result, E.InvalidArgumentError)
    assert s.applied_index == 3


def test_a_membership_change_with_a_bad_context_is_refused_before_anything_changes() -> None:
    s = new_state()
    for context in (b"\xc1", msgpack.packb([1, 2]), msgpack.packb([1, 2, [9, "x", "nowhere", "tcp://h:1", "", False]])):
        with pytest.raises(E.InvalidArgumentError):
            s.decode_member_change(ConfChange(ConfChangeType.ADD_NODE, 9, context))
    # A member info naming another id than the change's is refused too.
    info = MemberInfo(8, "m8", "tcp://h:1", "tcp://h:2", "").to_wire()
    with pytest.raises(E.InvalidArgumentError, match="names member 8"):
        s.decode_member_change(ConfChange(ConfChangeType.ADD_NODE, 9, msgpack.packb([1, 2, info])))
    assert sorted(s.members) == [1, 2, 3]


def test_a_snapshot_that_does_not_restore_is_refused_with_a_disk_error() -> None:
    good = new_state().snapshot()
    ReplicatedState.check_snapshot(good)
    for bad in (b"", b"garbage", good[:-3], msgpack.packb([1, 42, [], b"not a kv snapshot"])):
        with pytest.raises(E.DiskError):
            ReplicatedState.check_snapshot(bad)


wire_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.binary(max_size=8)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=7),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    kinds=st.lists(
        st.sampled_from(["put", "delete_range", "txn", "compact", "lease_grant", "lease_revoke", "bogus"]), max_size=8
    ),
    args=st.lists(wire_values, min_size=8, max_size=8),
)
def test_two_members_applying_the_same_arbitrary_entries_agree(kinds: list[str], args: list[Any]) -> None:
    """Arbitrary arguments for every entry kind: apply never raises, and two members applying
    the same entries give the same answers and end in the same state."""
    a, b = new_state(), new_state()
    for i, kind in enumerate(kinds):
        data = entry(kind, args[i])
        ra = a.apply(data, i + 2, now=0.0)
        rb = b.apply(data, i + 2, now=0.0)
        assert repr(ra) == repr(rb)
    assert a.snapshot() == b.snapshot()
