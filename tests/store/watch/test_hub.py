"""WatchHub: one behaviour per test.  The randomized guarantee checks are in test_guarantees.py."""

from __future__ import annotations

import pytest

from store.api.errors import InvalidArgumentError, InvalidRangeError, KeyEmptyError
from store.api.kv import PutRequest, TxnRequest, prefix_end
from store.api.watch import WatchCreateRequest, WatchFilter, WatchResponse
from store.mvcc import KVStore
from store.watch import WatchHub
from store.watch.feed import Feed
from tests.store.watch.rig import Rig

PUT, DELETE = 0, 1


def test_created_response_comes_first_and_events_follow() -> None:
    rig = Rig()
    rig.put(b"a")
    wid = rig.watch(b"a")
    rig.put(b"a", b"2")
    rig.drain_all()
    created, batch = rig.got[wid]
    assert created == WatchResponse(wid, 2, created=True)
    assert batch.revision == 3
    assert rig.events(wid) == [(3, b"a", PUT)]


def test_single_key_prefix_and_from_key_watches() -> None:
    rig = Rig()
    single = rig.watch(b"a")
    prefix = rig.watch(b"a", prefix_end(b"a"))
    from_b = rig.watch(b"b", b"\0")
    for k in (b"a", b"ab", b"b", b"c", b"\x00"):
        rig.put(k)
    rig.delete(b"a", b"\0")
    rig.drain_all()
    assert rig.events(single) == [(2, b"a", PUT), (7, b"a", DELETE)]
    assert rig.events(prefix) == [(2, b"a", PUT), (3, b"ab", PUT), (7, b"a", DELETE), (7, b"ab", DELETE)]
    assert rig.events(from_b) == [(4, b"b", PUT), (5, b"c", PUT), (7, b"b", DELETE), (7, b"c", DELETE)]


def test_history_replay_then_live_without_gap() -> None:
    rig = Rig()
    for i in range(5):
        rig.put(b"k", b"%d" % i)  # revisions 2..6
    wid = rig.watch(b"k", start_revision=3)
    assert rig.hub.unsynced_count() == 1
    rig.put(b"k", b"live")  # 7: the watcher is unsynced, gets it from history
    rig.settle()
    assert rig.hub.unsynced_count() == 0
    rig.put(b"k", b"live2")  # 8: now live
    rig.drain_all()
    assert [r for r, _, _ in rig.events(wid)] == [3, 4, 5, 6, 7, 8]


def test_catch_up_goes_in_bounded_batches() -> None:
    rig = Rig(sync_revisions=2)
    for i in range(6):
        rig.put(b"k", b"%d" % i)  # 2..7
    wid = rig.watch(b"k", start_revision=2)
    rig.drain_all()
    rig.hub.sync_unsynced()
    rig.drain_all()
    assert [r for r, _, _ in rig.events(wid)] == [2, 3]
    rig.settle()
    assert [r for r, _, _ in rig.events(wid)] == [2, 3, 4, 5, 6, 7]


def test_start_revision_zero_watches_from_the_next_revision_and_future_starts_wait() -> None:
    rig = Rig()
    rig.put(b"k")  # 2
    now = rig.watch(b"k")
    future = rig.watch(b"k", start_revision=5)
    for _ in range(4):
        rig.put(b"k")  # 3..6
    rig.drain_all()
    assert [r for r, _, _ in rig.events(now)] == [3, 4, 5, 6]
    assert [r for r, _, _ in rig.events(future)] == [5, 6]


def test_compacted_start_is_canceled_with_the_compact_revision() -> None:
    rig = Rig()
    for _ in range(4):
        rig.put(b"k")  # 2..5
    rig.kv.compact(4)
    for start in (2, 4):  # below and at the compaction point
        wid = rig.watch(b"k", start_revision=start)
        rig.drain_all()
        assert rig.got[wid] == [
            WatchResponse(
                wid,
                5,
                created=True,
                canceled=True,
                compact_revision=4,
                cancel_reason="mvcc: required revision has been compacted",
            )
        ]
        assert rig.hub.get(wid) is None
    ok = rig.watch(b"k", start_revision=5)
    rig.settle()
    assert [r for r, _, _ in rig.events(ok)] == [5]


def test_unsynced_watcher_overtaken_by_compaction_is_canceled() -> None:
    rig = Rig()
    for _ in range(5):
        rig.put(b"k")  # 2..6
    wid = rig.watch(b"k", start_revision=2)
    rig.kv.compact(4)
    rig.hub.sync_unsynced()
    rig.drain_all()
    assert rig.got[wid][-1].canceled
    assert rig.got[wid][-1].compact_revision == 4
    assert rig.events(wid) == []
    assert rig.hub.watcher_count() == 0


def test_filters() -> None:
    rig = Rig()
    no_put = rig.watch(b"k", filters=[WatchFilter.NOPUT])
    no_delete = rig.watch(b"k", filters=[WatchFilter.NODELETE])
    rig.put(b"k")
    rig.delete(b"k")
    rig.drain_all()
    assert rig.events(no_put) == [(3, b"k", DELETE)]
    assert rig.events(no_delete) == [(2, b"k", PUT)]
    assert len(rig.got[no_put]) == 2  # created + one response: nothing sent for the filtered revision


def test_prev_kv_only_when_asked_and_event_objects_are_shared() -> None:
    rig = Rig()
    rig.put(b"k", b"old")
    with_prev = [rig.watch(b"k", prev_kv=True) for _ in range(2)]
    without = [rig.watch(b"k", b"l") for _ in range(2)]
    (ev,) = rig.put(b"k", b"new")
    rig.drain_all()
    a, b = (rig.got[w][1].events[0] for w in with_prev)
    c, d = (rig.got[w][1].events[0] for w in without)
    assert a is ev and b is ev
    assert c.prev_kv is None and c is d  # one stripped copy for all watchers
    assert c.kv is ev.kv


def test_all_events_of_a_revision_come_in_one_response() -> None:
    rig = Rig()
    wid = rig.watch(b"a", b"z")
    rig.txn(TxnRequest([], [PutRequest(k) for k in (b"a", b"b", b"c", b"d")]))
    rig.put(b"e")
    out = rig.drain(max_events=2)  # the budget is smaller than revision 2
    batches = [r for r in out if r.events]
    assert [len(r.events) for r in batches] == [4]
    assert batches[0].revision == 2  # more is queued: the response claims only what it holds
    rig.drain_all()
    assert rig.got[wid][-1].revision == 3


def test_drain_is_round_robin() -> None:
    rig = Rig()
    busy = rig.watch(b"busy")
    quiet = rig.watch(b"quiet")
    rig.drain_all()
    for _ in range(5):
        rig.put(b"busy")
    rig.put(b"quiet")
    out = rig.drain(max_events=2)
    assert [(r.watch_id, len(r.events)) for r in out] == [(busy, 2)]
    out = rig.drain(max_events=2)  # busy went to the back of the line
    assert [(r.watch_id, len(r.events)) for r in out] == [(quiet, 1), (busy, 1)]
    out = rig.drain(max_events=2)
    assert [(r.watch_id, len(r.events)) for r in out] == [(busy, 2)]
    assert rig.hub.pending() == 0


def test_slow_watcher_overflows_then_catches_up_without_gap_or_duplicate() -> None:
    rig = Rig(buffer_events=3)
    busy = rig.watch(b"k/", prefix_end(b"k/"))
    quiet = rig.watch(b"q")
    rig.drain_all()
    rig.put(b"k/0")  # 2
    rig.drain_all()  # busy has read revision 2; then nobody drains for a while
    for i in range(1, 10):
        rig.put(b"k/%d" % i)  # 3..11
    rig.put(b"q")  # 12
    assert not rig.hub.get(busy).synced  # type: ignore[union-attr]
    assert rig.hub.get(quiet).synced  # type: ignore[union-attr]
    rig.settle()
    assert [r for r, _, _ in rig.events(busy)] == list(range(2, 12))
    assert [r for r, _, _ in rig.events(quiet)] == [12]
    rig.put(b"k/x")  # 13: back on the live path
    rig.drain_all()
    assert rig.hub.get(busy).synced  # type: ignore[union-attr]
    assert [r for r, _, _ in rig.events(busy)][-1] == 13


def test_overflow_moves_the_watcher_to_unsynced_and_drops_its_buffer() -> None:
    rig = Rig(buffer_events=2)
    wid = rig.watch(b"k")
    rig.drain_all()
    rig.put(b"k")
    rig.put(b"k")
    w = rig.hub.get(wid)
    assert w is not None and w.synced and rig.hub.backlog(wid) == 2
    rig.put(b"k")  # the third does not fit
    w = rig.hub.get(wid)
    assert w is not None and not w.synced and w.buffer == [] and w.min_rev == 2
    assert rig.hub.pending() == 0
    rig.put(b"other")
    rig.settle()
    assert [r for r, _, _ in rig.events(wid)] == [2, 3, 4]


def test_compaction_during_catch_up() -> None:
    rig = Rig(buffer_events=2, sync_revisions=2)
    wid = rig.watch(b"k")
    rig.drain_all()
    for _ in range(8):
        rig.put(b"k")  # 2..9; overflows at 4
    rig.hub.sync_unsynced()
    rig.drain_all()
    got = [r for r, _, _ in rig.events(wid)]
    rig.kv.compact(7)
    rig.settle()
    last = rig.got[wid][-1]
    assert last.canceled and last.compact_revision == 7
    events = [r for r, _, _ in rig.events(wid)]
    assert events == list(range(2, 2 + len(events)))  # a gap-free prefix, then the cancel
    assert events[: len(got)] == got
    assert events[-1] < 7


def test_progress_only_when_nothing_is_pending() -> None:
    rig = Rig()
    wid = rig.watch(b"k")
    assert rig.hub.request_progress(wid) == 0  # the created response is still queued
    rig.drain_all()
    assert rig.hub.request_progress(wid) == 1
    rig.drain_all()
    assert rig.got[wid][-1] == WatchResponse(wid, 1)
    assert rig.got[wid][-1].is_progress_notify
    rig.put(b"k")
    assert rig.hub.request_progress(wid) == 0  # an event is pending
    rig.drain_all()
    rig.put(b"other")
    assert rig.hub.request_progress(0) == 1  # 0: every watcher
    rig.drain_all()
    assert rig.got[wid][-1] == WatchResponse(wid, 3)


def test_no_progress_for_an_unsynced_watcher() -> None:
    rig = Rig()
    for _ in range(3):
        rig.put(b"k")
    wid = rig.watch(b"k", start_revision=2)
    rig.drain_all()
    assert rig.hub.request_progress(wid) == 0
    rig.settle()
    assert rig.hub.request_progress(wid) == 1


def test_no_progress_below_a_future_start_revision() -> None:
    """A watch resumed at start S on a member still behind S must not bookmark below S - 1:
    the client already has every event up to S - 1 from another member, so a lower bookmark
    would move its stream backwards (found by `raftkube chaos --faults kill-all --seed 7`)."""
    rig = Rig()
    rig.put(b"other")  # revision 2
    wid = rig.watch(b"k", start_revision=5, progress_notify=True)
    rig.drain_all()
    assert rig.hub.request_progress(wid) == 0
    assert rig.hub.progress_tick() == 0
    rig.put(b"other")  # 3
    rig.put(b"other")  # 4: the member has now reached S - 1
    assert rig.hub.request_progress(wid) == 1
    rig.drain_all()
    assert rig.got[wid][-1] == WatchResponse(wid, 4)
    assert rig.got[wid][-1].is_progress_notify


def test_progress_tick_skips_watchers_that_got_events() -> None:
    rig = Rig()
    busy = rig.watch(b"a", progress_notify=True)
    idle = rig.watch(b"b", progress_notify=True)
    plain = rig.watch(b"c")
    rig.drain_all()
    rig.put(b"a")
    rig.drain_all()
    assert rig.hub.progress_tick() == 1
    rig.drain_all()
    assert rig.got[idle][-1] == WatchResponse(idle, 2)
    assert len(rig.got[plain]) == 1
    assert rig.hub.progress_tick() == 2  # busy was quiet since the last tick
    rig.drain_all()
    assert rig.got[busy][-1].is_progress_notify


def test_cancel() -> None:
    rig = Rig()
    wid = rig.watch(b"k")
    rig.put(b"k")
    assert rig.hub.cancel(wid) == WatchResponse(wid, 2, canceled=True)
    assert rig.hub.pending() == 0
    assert rig.hub.cancel(wid) is None
    rig.put(b"k")
    assert rig.hub.drain() == []
    assert rig.hub.watcher_count() == 0


def test_refused_watches() -> None:
    rig = Rig()
    wid = rig.watch(b"k")
    with pytest.raises(KeyEmptyError):
        rig.watch(b"")
    with pytest.raises(InvalidRangeError):
        rig.watch(b"b", b"a")
    with pytest.raises(InvalidArgumentError):
        rig.watch(b"k", start_revision=-1)
    with pytest.raises(InvalidArgumentError):
        rig.watch(b"k", watch_id=wid)
    assert rig.hub.watcher_count() == 1
    assert rig.watch(b"k", watch_id=77) == 77
    assert rig.watch(b"k") not in (wid, 77)


def test_missed_notify_falls_back_to_history() -> None:
    rig = Rig()
    wid = rig.watch(b"k")
    rig.drain_all()
    rig.kv.put(PutRequest(b"k", b"unnotified"))  # 2: the caller forgot to notify
    rig.put(b"k")  # 3: notify sees the gap
    rig.settle()
    assert [r for r, _, _ in rig.events(wid)] == [2, 3]


def test_old_or_repeated_notifies_are_ignored() -> None:
    rig = Rig()
    wid = rig.watch(b"k")
    events = rig.put(b"k")
    rig.hub.notify(2, events)
    rig.drain_all()
    assert [r for r, _, _ in rig.events(wid)] == [2]


def test_restore_catches_watchers_up_from_the_new_store() -> None:
    rig = Rig()
    wid = rig.watch(b"k")
    rig.put(b"k")  # 2
    rig.drain_all()
    leader = KVStore.restore(rig.kv.snapshot())
    for _ in range(3):
        leader.put(PutRequest(b"k"))  # 3..5, which this member never applied
    rig.kv = KVStore.restore(leader.snapshot())
    rig.hub.restore(rig.kv)
    rig.put(b"k")  # 6
    rig.settle()
    assert [r for r, _, _ in rig.events(wid)] == [2, 3, 4, 5, 6]


def test_non_matching_single_key_watchers_are_never_looked_at(monkeypatch: pytest.MonkeyPatch) -> None:
    kv = KVStore()
    hub = WatchHub(kv)
    # Filtered watchers, so that looking at one means calling its `wants`.
    nodelete = [WatchFilter.NODELETE]
    for i in range(5000):
        hub.create(WatchCreateRequest(b"other/%d" % i, filters=nodelete))
    hub.create(WatchCreateRequest(b"k", filters=nodelete))
    calls = 0
    wants = Feed.wants  # synced watchers are matched through their feed

    def counting(self: Feed, ev: object) -> bool:
        nonlocal calls
        calls += 1
        return wants(self, ev)  # type: ignore[arg-type]

    monkeypatch.setattr(Feed, "wants", counting)
    resp, events = kv.put(PutRequest(b"k"))
    hub.notify(resp.revision, events)
    assert calls == 1


def test_watchers_catching_up_from_different_revisions_share_batches() -> None:
    rig = Rig(sync_revisions=2)
    for i in range(10):
        rig.put(b"k", b"%d" % i)  # 2..11
    old = rig.watch(b"k", start_revision=2)
    newer = rig.watch(b"k", start_revision=8)
    rig.hub.sync_unsynced()  # replays 2..3: nothing for `newer`, which must stay at 8
    assert rig.hub.get(newer).min_rev == 8  # type: ignore[union-attr]
    rig.settle()
    assert [r for r, _, _ in rig.events(old)] == list(range(2, 12))
    assert [r for r, _, _ in rig.events(newer)] == [8, 9, 10, 11]
