"""Unit tests of RaftLog (log.py) and its unstable tail (log_unstable.py)."""

from __future__ import annotations

import pytest

from store.raft.errors import CompactedError, UnavailableError
from store.raft.log import RaftLog
from store.raft.log_unstable import Unstable
from store.raft.storage import MemoryStorage, entry_size
from store.raft.types import ConfState, Entry, Snapshot, SnapshotMetadata


def entries(first_index: int, terms: list[int], payload: bytes = b"") -> list[Entry]:
    return [Entry(term=t, index=first_index + i, data=payload) for i, t in enumerate(terms)]


def stable_log(terms: list[int], payload: bytes = b"") -> RaftLog:
    """A log whose storage holds one entry per term, from index 1 (nothing unstable, nothing committed)."""
    storage = MemoryStorage()
    storage.append(entries(1, terms, payload))
    return RaftLog(storage)


def log_terms(log: RaftLog) -> list[int]:
    return [log.term(i) for i in range(log.first_index(), log.last_index() + 1)]


# ---------------------------------------------------------------------- construction and terms


def test_new_log_starts_committed_and_applied_at_the_snapshot_point() -> None:
    """A log built on compacted storage treats the snapshot index as committed and applied."""
    storage = MemoryStorage()
    storage.append(entries(1, [1, 1, 2, 2, 3]))
    storage.create_snapshot(3, ConfState(voters=(1,)), b"")
    storage.compact(3)
    log = RaftLog(storage)
    assert (log.first_index(), log.last_index()) == (4, 5)
    assert (log.committed, log.applied) == (3, 3)
    assert log.unstable.offset == 6
    assert log.term(3) == 2  # the dummy position keeps its term
    with pytest.raises(CompactedError):
        log.term(2)
    with pytest.raises(UnavailableError):
        log.term(6)
    assert log.term_or_zero(2) == 0
    assert log.term_or_zero(6) == 0


def test_is_up_to_date_compares_last_term_then_last_index() -> None:
    """A candidate log is up to date if its last term is higher, or equal with an index at least ours (§5.4.1)."""
    log = stable_log([1, 2, 2])  # last entry 3, term 2
    assert log.is_up_to_date(1, 3)  # higher term wins even with a shorter log
    assert log.is_up_to_date(3, 2)
    assert log.is_up_to_date(4, 2)
    assert not log.is_up_to_date(2, 2)
    assert not log.is_up_to_date(100, 1)


# ---------------------------------------------------------------------- maybe_append / find_conflict


def test_maybe_append_after_matching_entry_returns_last_new_index_and_commits() -> None:
    """maybe_append accepts entries after a matching (index, term), returns the last new index, bounds commit."""
    log = stable_log([1, 1, 2])
    last_new = log.maybe_append(3, 2, 10, entries(4, [3, 3]))
    assert last_new == 5
    assert log_terms(log) == [1, 1, 2, 3, 3]
    assert log.committed == 5  # min(leader commit 10, last new 5)
    assert [e.index for e in log.unstable_entries()] == [4, 5]


def test_maybe_append_rejects_when_previous_entry_does_not_match() -> None:
    """maybe_append returns None and changes nothing when (index, log_term) is not in the log."""
    log = stable_log([1, 1, 2])
    assert log.maybe_append(3, 1, 3, entries(4, [3])) is None  # wrong term at 3
    assert log.maybe_append(5, 2, 3, entries(6, [3])) is None  # index beyond our log
    assert log_terms(log) == [1, 1, 2]
    assert log.committed == 0


def test_maybe_append_truncates_conflicting_suffix() -> None:
    """A conflicting entry and everything after it are replaced by the leader's entries."""
    log = stable_log([1, 2, 2, 2])
    assert log.maybe_append(1, 1, 0, entries(2, [3, 3])) == 3
    assert log_terms(log) == [1, 3, 3]
    assert log.last_index() == 3
    assert log.unstable.offset == 2


def test_maybe_append_of_already_present_entries_keeps_longer_log_and_bounds_commit() -> None:
    """Entries we already hold are not re-appended, the longer log is kept, and commit stops at the last new index."""
    log = stable_log([1, 1, 1, 1])
    assert log.maybe_append(1, 1, 4, entries(2, [1])) == 2
    assert log.last_index() == 4
    assert log.unstable_entries() == []
    assert log.committed == 2  # not 4: entries 3..4 were not vouched for by this message


def test_maybe_append_conflicting_with_committed_entry_is_a_fatal_error() -> None:
    """A leader's entry conflicting with a committed one is a safety violation: the log refuses it."""
    log = stable_log([1, 1, 1])
    log.commit_to(3)
    with pytest.raises(AssertionError):
        log.maybe_append(1, 1, 3, entries(2, [2]))


def test_find_conflict_returns_first_missing_or_mismatching_index() -> None:
    """find_conflict is 0 when all entries match, else the first index missing or with another term."""
    log = stable_log([1, 2, 3])
    assert log.find_conflict([]) == 0
    assert log.find_conflict(entries(1, [1, 2, 3])) == 0
    assert log.find_conflict(entries(2, [2, 3])) == 0
    assert log.find_conflict(entries(2, [2, 3, 4])) == 4  # new entry
    assert log.find_conflict(entries(2, [2, 4, 4])) == 3  # term mismatch
    assert log.find_conflict(entries(1, [4])) == 1


def test_find_conflict_by_term_returns_largest_entry_with_term_at_most_the_given_one() -> None:
    """find_conflict_by_term walks back to the last index whose term is <= the leader's (fast backtracking)."""
    log = stable_log([1, 1, 2, 2, 5, 5])
    assert log.find_conflict_by_term(6, 5) == (6, 5)
    assert log.find_conflict_by_term(6, 3) == (4, 2)
    assert log.find_conflict_by_term(3, 1) == (2, 1)
    assert log.find_conflict_by_term(6, 0) == (0, 0)
    assert log.find_conflict_by_term(100, 9) == (6, 5)  # clamped to our last index


def test_find_conflict_by_term_stops_at_compacted_index_with_unknown_term() -> None:
    """Reaching a compacted index, find_conflict_by_term answers that index with term 0 (unknown)."""
    storage = MemoryStorage()
    storage.append(entries(1, [1, 1, 2, 2, 5, 5]))
    storage.create_snapshot(3, ConfState(voters=(1,)), b"")
    storage.compact(3)
    log = RaftLog(storage)
    assert log.find_conflict_by_term(6, 2) == (4, 2)
    assert log.find_conflict_by_term(6, 1) == (2, 0)


# ---------------------------------------------------------------------- commit and apply


def test_commit_to_never_moves_back_and_never_passes_last_index() -> None:
    """commit_to only increases the commit index and refuses to commit past the last entry."""
    log = stable_log([1, 1, 1])
    log.commit_to(2)
    log.commit_to(1)
    assert log.committed == 2
    with pytest.raises(AssertionError):
        log.commit_to(4)
    assert log.committed == 2


def test_maybe_commit_only_for_entries_of_the_given_term() -> None:
    """maybe_commit moves the commit index only when the entry at max_index has the given term (§5.4.2)."""
    log = stable_log([1, 2, 3])
    assert not log.maybe_commit(2, 3)
    assert log.committed == 0
    assert log.maybe_commit(3, 3)
    assert log.committed == 3
    assert not log.maybe_commit(3, 3)  # nothing new


def test_applied_to_must_stay_within_applied_and_committed() -> None:
    """applied_to advances applied up to committed and rejects going back or beyond."""
    log = stable_log([1, 1, 1])
    log.commit_to(2)
    log.applied_to(1)
    assert log.applied == 1
    with pytest.raises(AssertionError):
        log.applied_to(3)
    log.applied_to(2)
    with pytest.raises(AssertionError):
        log.applied_to(1)


def test_next_committed_ents_respects_max_applying_size() -> None:
    """next_committed_ents hands out committed, unapplied entries within the size limit (at least one)."""
    storage = MemoryStorage()
    storage.append(entries(1, [1, 1, 1, 1], payload=b"x" * 10))
    size = entry_size(Entry(term=1, index=1, data=b"x" * 10))
    log = RaftLog(storage, max_applying_size=2 * size)
    assert log.next_committed_ents() == []
    log.commit_to(4)
    assert [e.index for e in log.next_committed_ents()] == [1, 2]
    log.applied_to(2)
    assert [e.index for e in log.next_committed_ents()] == [3, 4]
    log.applied_to(4)
    assert not log.has_next_committed_ents()


# ---------------------------------------------------------------------- slices


def test_slice_is_limited_by_bytes_but_returns_at_least_one_entry() -> None:
    """slice stops before max_size bytes, yet always returns at least one entry."""
    log = stable_log([1] * 5, payload=b"y" * 10)
    size = entry_size(Entry(term=1, index=1, data=b"y" * 10))
    assert [e.index for e in log.slice(1, 6)] == [1, 2, 3, 4, 5]
    assert [e.index for e in log.slice(1, 6, 3 * size)] == [1, 2, 3]
    assert [e.index for e in log.slice(1, 6, 3 * size - 1)] == [1, 2]
    assert [e.index for e in log.slice(2, 6, 1)] == [2]
    assert log.slice(3, 3) == []


def test_slice_spans_stable_storage_and_unstable_tail_within_limit() -> None:
    """A slice crossing from storage into unstable entries keeps order and the byte limit."""
    log = stable_log([1, 1, 1], payload=b"z" * 4)
    log.append(entries(4, [2, 2, 2], payload=b"z" * 4))
    size = entry_size(Entry(term=1, index=1, data=b"z" * 4))
    assert log.unstable.offset == 4
    assert [(e.index, e.term) for e in log.slice(2, 7)] == [(2, 1), (3, 1), (4, 2), (5, 2), (6, 2)]
    assert [e.index for e in log.slice(2, 7, 4 * size)] == [2, 3, 4, 5]
    assert [e.index for e in log.entries(5)] == [5, 6]
    assert log.entries(7) == []


def test_slice_outside_the_log_raises() -> None:
    """slice raises CompactedError below first_index and UnavailableError beyond last_index + 1."""
    storage = MemoryStorage()
    storage.append(entries(1, [1, 1, 1, 1]))
    storage.create_snapshot(2, ConfState(voters=(1,)), b"")
    storage.compact(2)
    log = RaftLog(storage)
    with pytest.raises(CompactedError):
        log.slice(2, 4)
    with pytest.raises(UnavailableError):
        log.slice(3, 6)
    assert [e.index for e in log.slice(3, 5)] == [3, 4]


# ---------------------------------------------------------------------- unstable


def test_stable_to_ignores_a_stale_term() -> None:
    """stable_to with a term that no longer matches the unstable entry (it was overwritten) does nothing."""
    u = Unstable(5)
    u.truncate_and_append(entries(5, [2, 2, 2]))
    u.stable_to(6, 1)
    assert (u.offset, [e.index for e in u.entries]) == (5, [5, 6, 7])
    u.stable_to(6, 2)
    assert (u.offset, [e.index for e in u.entries]) == (7, [7])
    u.stable_to(4, 2)  # below offset: already stable
    assert u.offset == 7


def test_stable_to_after_overwrite_keeps_the_newer_entries() -> None:
    """A Ready persisted before a conflicting append must not mark the newer entries stable."""
    log = stable_log([1])
    log.append(entries(2, [1, 1]))
    persisted = list(log.unstable_entries())
    log.append(entries(3, [2]))  # overwrite index 3 with a term-2 entry before advance
    last = persisted[-1]
    log.stable_to(last.index, last.term)
    assert [(e.index, e.term) for e in log.unstable_entries()] == [(2, 1), (3, 2)]
    assert log.unstable.offset == 2


def test_unstable_truncate_and_append_cases() -> None:
    """truncate_and_append appends contiguous entries, replaces all from before offset, or truncates in the middle."""
    u = Unstable(5)
    u.truncate_and_append(entries(5, [1, 1]))
    u.truncate_and_append(entries(7, [1]))
    assert ([e.index for e in u.entries], u.offset) == ([5, 6, 7], 5)
    u.truncate_and_append(entries(6, [2]))
    assert ([(e.index, e.term) for e in u.entries], u.offset) == ([(5, 1), (6, 2)], 5)
    u.truncate_and_append(entries(4, [3, 3]))
    assert ([(e.index, e.term) for e in u.entries], u.offset) == ([(4, 3), (5, 3)], 4)


def test_unstable_snapshot_defines_first_last_and_term() -> None:
    """An unstable snapshot sets first index to snapshot+1, and its index answers with its term."""
    u = Unstable(3)
    snap = Snapshot(SnapshotMetadata(index=10, term=4, conf_state=ConfState(voters=(1,))))
    u.restore(snap)
    assert u.maybe_first_index() == 11
    assert u.maybe_last_index() == 10
    assert u.maybe_term(10) == 4
    assert u.maybe_term(9) is None
    u.truncate_and_append(entries(11, [5]))
    assert u.maybe_last_index() == 11
    u.stable_snap_to(9)
    assert u.snapshot is snap
    u.stable_snap_to(10)
    assert u.snapshot is None


def test_log_restore_replaces_everything_with_the_snapshot() -> None:
    """RaftLog.restore makes the snapshot the new start of the log and commits its index."""
    log = stable_log([1, 1, 1])
    log.restore(Snapshot(SnapshotMetadata(index=20, term=3, conf_state=ConfState(voters=(1,)))))
    assert (log.first_index(), log.last_index(), log.committed) == (21, 20, 20)
    assert log.term(20) == 3
    assert log.last_term() == 3
