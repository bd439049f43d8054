"""Unit tests of MemoryStorage (storage.py)."""

from __future__ import annotations

import pytest

from store.raft.errors import CompactedError, SnapshotOutOfDateError, UnavailableError
from store.raft.storage import MemoryStorage, entry_size, limit_size
from store.raft.types import ConfState, Entry, HardState, Snapshot, SnapshotMetadata

CONF = ConfState(voters=(1, 2, 3))


def storage_with(terms: list[int], payload: bytes = b"") -> MemoryStorage:
    s = MemoryStorage()
    s.append([Entry(term=t, index=i + 1, data=payload) for i, t in enumerate(terms)])
    return s


def test_empty_storage_positions() -> None:
    """An empty storage has first index 1, last index 0, the dummy term 0 and an empty snapshot."""
    s = MemoryStorage()
    assert (s.first_index(), s.last_index()) == (1, 0)
    assert s.term(0) == 0
    assert s.snapshot().is_empty
    assert s.initial_state() == (HardState(), ConfState())


def test_create_snapshot_records_term_and_conf_without_compacting() -> None:
    """create_snapshot captures (index, term, conf state, data) and leaves the entries in place."""
    s = storage_with([1, 1, 2, 2, 3])
    snap = s.create_snapshot(4, CONF, b"state@4")
    assert snap.metadata == SnapshotMetadata(index=4, term=2, conf_state=CONF)
    assert snap.data == b"state@4"
    assert s.snapshot() == snap
    assert (s.first_index(), s.last_index()) == (1, 5)
    assert s.initial_state()[1] == CONF


def test_create_snapshot_refuses_old_or_future_index() -> None:
    """create_snapshot refuses an index not newer than the current snapshot or beyond the last entry."""
    s = storage_with([1, 1, 2])
    s.create_snapshot(2, CONF, b"")
    with pytest.raises(SnapshotOutOfDateError):
        s.create_snapshot(2, CONF, b"")
    with pytest.raises(SnapshotOutOfDateError):
        s.create_snapshot(1, CONF, b"")
    with pytest.raises(UnavailableError):
        s.create_snapshot(4, CONF, b"")


def test_compact_makes_the_index_the_dummy_position() -> None:
    """compact(i) drops entries up to i; i's term stays readable and lower indexes become compacted."""
    s = storage_with([1, 1, 2, 2, 3])
    s.compact(3)
    assert (s.first_index(), s.last_index()) == (4, 5)
    assert s.term(3) == 2
    with pytest.raises(CompactedError):
        s.term(2)
    with pytest.raises(CompactedError):
        s.entries(3, 5, 1 << 30)
    assert [e.index for e in s.entries(4, 6, 1 << 30)] == [4, 5]
    with pytest.raises(CompactedError):
        s.compact(3)
    with pytest.raises(UnavailableError):
        s.compact(6)


def test_entries_are_limited_by_size_but_at_least_one() -> None:
    """entries(lo, hi, max_size) returns the longest prefix within max_size, never empty."""
    s = storage_with([1, 1, 1, 1], payload=b"p" * 20)
    size = entry_size(Entry(term=1, index=1, data=b"p" * 20))
    assert size == 36
    assert [e.index for e in s.entries(1, 5, 2 * size)] == [1, 2]
    assert [e.index for e in s.entries(1, 5, 2 * size + 1)] == [1, 2]
    assert [e.index for e in s.entries(2, 5, 0)] == [2]
    with pytest.raises(UnavailableError):
        s.entries(1, 6, 1 << 30)
    with pytest.raises(UnavailableError):
        s.term(5)


def test_limit_size_keeps_prefix_within_budget() -> None:
    """limit_size keeps entries while the running total stays within max_size, with a floor of one entry."""
    ents = [Entry(term=1, index=i, data=b"a" * 4) for i in range(1, 5)]  # 20 bytes each
    assert limit_size([], 0) == []
    assert len(limit_size(ents, 0)) == 1
    assert len(limit_size(ents, 40)) == 2
    assert len(limit_size(ents, 59)) == 2
    assert len(limit_size(ents, 60)) == 3


def test_append_overwrites_conflicting_suffix_and_skips_compacted_part() -> None:
    """append replaces the suffix from the first given index and ignores the part already compacted."""
    s = storage_with([1, 1, 1, 1, 1])
    s.append([Entry(term=2, index=3), Entry(term=2, index=4)])
    assert [s.term(i) for i in range(1, s.last_index() + 1)] == [1, 1, 2, 2]
    s.compact(2)
    s.append([Entry(term=3, index=1), Entry(term=3, index=2), Entry(term=3, index=3)])
    assert (s.first_index(), s.last_index()) == (3, 3)
    assert s.term(3) == 3
    s.append([Entry(term=3, index=1)])  # entirely compacted: ignored
    assert s.last_index() == 3


def test_append_with_a_gap_is_refused() -> None:
    """append refuses entries that would leave a hole after the last index."""
    s = storage_with([1, 1])
    with pytest.raises(UnavailableError):
        s.append([Entry(term=1, index=4)])
    assert s.last_index() == 2


def test_apply_snapshot_replaces_the_log_and_refuses_older_ones() -> None:
    """apply_snapshot resets the log to the snapshot point; an older or equal snapshot is out of date."""
    s = storage_with([1, 1, 1])
    snap = Snapshot(SnapshotMetadata(index=10, term=4, conf_state=CONF), b"data")
    s.apply_snapshot(snap)
    assert (s.first_index(), s.last_index(), s.term(10)) == (11, 10, 4)
    assert s.snapshot() == snap
    with pytest.raises(SnapshotOutOfDateError):
        s.apply_snapshot(Snapshot(SnapshotMetadata(index=10, term=4, conf_state=CONF)))
    with pytest.raises(SnapshotOutOfDateError):
        s.apply_snapshot(Snapshot(SnapshotMetadata(index=5, term=4, conf_state=CONF)))


def test_set_hard_state_is_returned_by_initial_state() -> None:
    """The hard state written by the application comes back from initial_state."""
    s = MemoryStorage()
    hs = HardState(term=3, vote=2, commit=0)
    s.set_hard_state(hs)
    assert s.initial_state() == (hs, ConfState())
