"""Unit tests of the leader's per-follower flow control (progress.py)."""

from __future__ import annotations

from store.raft.log import NO_LIMIT
from store.raft.progress import Inflights, Progress, ProgressState


def progress(next_index: int = 5, match: int = 0, max_inflight: int = 3, max_bytes: int = NO_LIMIT) -> Progress:
    pr = Progress(next_index, max_inflight, max_bytes, is_learner=False)
    pr.match = match
    return pr


def test_inflights_full_by_count_and_freed_by_acknowledged_index() -> None:
    """Inflights is full at max_count messages and free_le releases every message up to the acked index."""
    inf = Inflights(3, NO_LIMIT)
    for last in (5, 7, 9):
        assert not inf.full()
        inf.add(last, 10)
    assert inf.full()
    assert inf.count() == 3
    inf.free_le(4)  # acknowledges nothing in flight
    assert inf.count() == 3
    inf.free_le(7)
    assert inf.count() == 1
    assert not inf.full()
    inf.free_le(100)
    assert inf.count() == 0


def test_inflights_full_by_bytes() -> None:
    """Inflights is full once the bytes in flight reach max_bytes, and freeing releases those bytes."""
    inf = Inflights(100, 100)
    inf.add(1, 60)
    assert not inf.full()
    inf.add(2, 40)
    assert inf.full()
    inf.free_le(1)
    assert not inf.full()
    inf.add(3, 59)
    assert not inf.full()
    inf.add(4, 1)
    assert inf.full()
    inf.reset()
    assert (inf.count(), inf.full()) == (0, False)


def test_probe_sends_one_append_then_pauses() -> None:
    """In PROBE a non-empty append pauses the flow; an empty one does not."""
    pr = progress()
    assert pr.state == ProgressState.PROBE
    pr.sent_entries(0, 0)
    assert not pr.is_paused()
    pr.sent_entries(2, 40)
    assert pr.is_paused()
    assert pr.next == 5  # probing does not advance next optimistically


def test_replicate_advances_next_optimistically_until_window_full() -> None:
    """In REPLICATE each append advances next and occupies the window; a full window pauses."""
    pr = progress(next_index=5, match=4)
    pr.become_replicate()
    assert pr.next == 5
    pr.sent_entries(2, 10)
    pr.sent_entries(1, 10)
    assert (pr.next, pr.is_paused()) == (8, False)
    pr.sent_entries(3, 10)
    assert (pr.next, pr.is_paused(), pr.inflights.count()) == (11, True, 3)
    assert pr.maybe_update(7)
    pr.inflights.free_le(7)
    assert (pr.match, pr.is_paused(), pr.inflights.count()) == (7, False, 1)


def test_maybe_update_moves_match_only_forward() -> None:
    """maybe_update reports progress only for a higher index, and keeps match < next."""
    pr = progress(next_index=5, match=3)
    assert not pr.maybe_update(2)
    assert pr.match == 3
    assert pr.maybe_update(9)
    assert (pr.match, pr.next) == (9, 10)


def test_maybe_decr_to_in_probe_uses_hint_and_ignores_stale_rejections() -> None:
    """In PROBE only a rejection of the latest probe (next-1) counts, and next goes to min(rejected, hint+1)."""
    pr = progress(next_index=10, match=2)
    pr.sent_entries(1, 10)
    assert pr.is_paused()
    assert not pr.maybe_decr_to(8, 3)  # not our latest probe
    assert pr.next == 10
    assert pr.maybe_decr_to(9, 4)
    assert (pr.next, pr.is_paused()) == (5, False)
    assert pr.maybe_decr_to(4, 0)
    assert pr.next == 3  # never below match + 1


def test_maybe_decr_to_in_replicate_falls_back_to_match() -> None:
    """In REPLICATE a rejection above match resets next to match+1; one at or below match is stale."""
    pr = progress(next_index=5, match=4)
    pr.become_replicate()
    pr.sent_entries(5, 10)
    assert pr.next == 10
    assert not pr.maybe_decr_to(4, 0)
    assert pr.next == 10
    assert pr.maybe_decr_to(7, 0)
    assert pr.next == 5


def test_state_transitions_reset_flow_control() -> None:
    """become_probe / become_replicate / become_snapshot set next and clear the window and pause."""
    pr = progress(next_index=5, match=4)
    pr.become_replicate()
    pr.sent_entries(3, 10)
    pr.sent_entries(3, 10)
    pr.sent_entries(3, 10)
    assert pr.is_paused()
    pr.become_probe()
    assert (pr.state, pr.next, pr.is_paused(), pr.inflights.count()) == (ProgressState.PROBE, 5, False, 0)
    pr.become_snapshot(20)
    assert (pr.state, pr.pending_snapshot, pr.is_paused()) == (ProgressState.SNAPSHOT, 20, True)
    pr.become_probe()
    assert (pr.state, pr.next, pr.pending_snapshot) == (ProgressState.PROBE, 21, 0)
    pr.become_snapshot(20)
    pr.pending_snapshot = 0  # a failed snapshot forgets the pending index
    pr.become_probe()
    assert pr.next == 5
