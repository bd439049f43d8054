"""Each check catches the violation it is named after (one broken thing per history)."""

from __future__ import annotations

from dataclasses import replace

from store.api.kv import (
    Event,
    EventType,
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    TxnRequest,
)
from store.chaos.check import check_history, merge_apply_logs
from store.chaos.history import FAIL, UNKNOWN, History, Violation, WatchResponseSeen
from store.server.apply_log import SNAPSHOT_INSTALLED
from tests.store.chaos.builder import Builder, entry_data


def names(violations: list[Violation]) -> set[str]:
    return {v.check for v in violations}


def base() -> Builder:
    b = Builder()
    b.put(b"a", b"v1", client=1)
    b.put(b"b", b"v2", client=2)
    b.put(b"a", b"v3", client=1)
    return b


def test_stale_read_is_caught_by_realtime() -> None:
    b = base()
    op = b.get(b"a")
    op.response = RangeResponse(op.revision, [b.kv.range(RangeRequest(b"a", revision=2)).kvs[0]], False, 1)
    found = check_history(b.finish())
    assert names(found) == {"realtime", "wgl"}
    assert "v1" in next(v for v in found if v.check == "realtime").message


def test_stale_revision_is_caught_by_realtime_but_not_wgl() -> None:
    b = base()
    op = b.get(b"b", member=2)
    op.revision = op.response.revision = 3  # b's value was the same at revision 3: content agrees
    assert names(check_history(b.finish())) == {"realtime"}


def test_lost_ack() -> None:
    b = base()
    b.put(b"c", b"v4", client=1)
    del b.history.applied.entries[max(b.history.applied.entries)]
    assert "lost-write" in names(check_history(b.finish()))


def test_wrong_prev_kv_is_a_lost_write() -> None:
    b = base()
    op = b.put(b"a", b"v4", prev_kv=True)
    op.response = PutResponse(op.revision, None)
    assert names(check_history(b.finish())) == {"lost-write", "wgl"}


def test_failed_write_applied() -> None:
    b = base()
    b.put(b"c", b"v4", outcome=FAIL)
    assert names(check_history(b.finish())) == {"failed-write-applied"}


def test_duplicate_apply() -> None:
    b = base()
    b.put(b"c", b"v4", outcome=UNKNOWN)
    b.apply("put", PutRequest(b"c", b"v4").to_wire())
    assert "duplicate-apply" in names(check_history(b.finish()))


def test_phantom_write() -> None:
    b = base()
    b.apply("put", PutRequest(b"c", b"ghost").to_wire())
    assert names(check_history(b.finish())) == {"phantom-write"}


def test_revision_going_back_for_a_client() -> None:
    b = base()
    b.read(RangeRequest(b"a", serializable=True), client=7, endpoint="m1")
    old = b.read(RangeRequest(b"b", serializable=True), client=7, endpoint="m1")
    old.revision = old.response.revision = 3  # a lagging member, content as of 3
    assert names(check_history(b.finish())) == {"revision-monotonic"}


def test_revision_going_back_for_a_member() -> None:
    b = base()
    b.get(b"a", client=2, member=2)
    old = b.get(b"b", client=3, member=2)
    old.revision = old.response.revision = 3
    found = check_history(b.finish())
    assert "revision-monotonic" in names(found)
    assert any("member 2" in v.message for v in found if v.check == "revision-monotonic")


def test_wrong_serializable_read() -> None:
    b = base()
    op = b.read(RangeRequest(b"a", revision=2))
    op.response = replace(op.response, kvs=[KeyValue(b"a", 2, 4, 2, b"v3")])
    assert names(check_history(b.finish())) == {"serializable-read"}


def test_wgl_catches_what_revisions_cannot_see() -> None:
    """Two clients read a then a stale value in real-time order; revisions were forged to agree."""
    b = base()
    new = b.get(b"a", client=5)
    old = b.get(b"a", client=6)
    old.response = replace(old.response, kvs=[KeyValue(b"a", 2, 2, 1, b"v1")])
    found = check_history(b.finish())
    assert "wgl" in names(found)
    w = next(v for v in found if v.check == "wgl")
    assert new in w.operations and old in w.operations
    assert "v1" in w.message


def test_wgl_accepts_concurrent_overlap() -> None:
    b = base()
    w = b.put(b"a", b"v4", client=1)
    r = b.get(b"a", client=2)
    r.response = replace(r.response, kvs=[KeyValue(b"a", 2, 4, 2, b"v3")])
    r.revision = r.response.revision = 4
    r.call, w.ret = w.call + 0.001, r.ret  # the read overlapped the write: v3 is fine
    assert "wgl" not in names(check_history(b.finish()))


def test_wgl_timeout_is_a_violation() -> None:
    b = Builder()
    for i in range(14):  # 14 overlapping unknown puts whose values all appear: 2^14 orders
        b.put(b"a", b"u%d" % i, client=i + 1, outcome=UNKNOWN)
    for i in range(10):
        b.get(b"a", client=20 + i)
    assert "checker-timeout" in names(check_history(b.finish(), wgl_budget_s=0.0))


def test_apply_conflict() -> None:
    logs = {
        1: [[2, 1, 0, entry_data("put", PutRequest(b"a", b"x").to_wire()), 2, 1.0]],
        2: [[2, 2, 0, entry_data("put", PutRequest(b"a", b"y").to_wire()), 2, 1.1]],
    }
    applied = merge_apply_logs(logs)
    assert len(applied.conflicts) == 1
    assert "applied-agreement" in names(check_history(History(applied=applied)))


def test_restart_reapplying_the_same_entries_is_fine() -> None:
    rec = [2, 1, 0, entry_data("put", PutRequest(b"a", b"x").to_wire()), 2, 1.0]
    applied = merge_apply_logs({1: [rec, [2, 1, SNAPSHOT_INSTALLED, b"", 2, 1.5], [*rec[:5], 2.0]]})
    assert applied.conflicts == [] and applied.entries[2].at == 1.0
    assert applied.restores == [(1, 2, 2, 1.5)]


def test_evidence_gap() -> None:
    b = base()
    del b.history.applied.entries[3]
    found = check_history(b.finish())
    assert any(v.check == "applied-agreement" and "gap" in v.message for v in found)


def test_revision_mismatch() -> None:
    b = base()
    b.history.applied.entries[3].revision = 9
    assert "applied-agreement" in names(check_history(b.finish()))


def test_hash_mismatch() -> None:
    b = base()
    h = b.finish()
    h.final_hashes[2] = (12345, *h.final_hashes[2][1:])
    assert names(check_history(h)) == {"member-hashes"}
    h.final_hashes[2] = (h.final_hashes[1][0], 99, 0)
    assert names(check_history(h)) == {"member-hashes"}


# ---------------------------------------------------------------------------- leases
def test_early_expiry() -> None:
    b = base()
    b.grant(10, 5)
    b.put(b"l", b"v9", lease=10)
    ka = b.keepalive(10, 5)
    b.expire(10, at=ka.call + 4.0)
    assert names(check_history(b.finish())) == {"lease-early-expiry"}


def test_late_expiry_never_revoked() -> None:
    b = base()
    b.grant(10, 5)
    b.t += 20
    b.get(b"a")
    assert names(check_history(b.finish())) == {"lease-late-expiry"}


def test_late_expiry_within_fault_allowance() -> None:
    b = base()
    g = b.grant(10, 5)
    b.history.faults.append((g.ret, g.ret + 30, "partition"))
    b.t += 20
    b.get(b"a")
    assert check_history(b.finish()) == []


def test_late_expiry_revoked_too_late() -> None:
    b = base()
    b.grant(10, 5)
    b.expire(10, at=b.t + 15)
    assert names(check_history(b.finish())) == {"lease-late-expiry"}


# ---------------------------------------------------------------------------- watches
def watched() -> Builder:
    b = base()
    b.delete(b"b")
    b.put(b"b", b"v4")
    return b


def test_watch_ordered() -> None:
    b = watched()
    w = b.watch(b"a", b"z", start=2)
    w.responses[1], w.responses[2] = w.responses[2], w.responses[1]
    assert "watch-ordered" in names(check_history(b.finish()))


def test_watch_unique() -> None:
    b = watched()
    w = b.watch(b"a", b"z", start=2)
    w.responses.append(w.responses[-1])
    assert "watch-unique" in names(check_history(b.finish()))


def test_watch_atomic() -> None:
    b2 = watched()
    b2.txn(TxnRequest([], [PutRequest(b"x", b"t1"), PutRequest(b"y", b"t2")], []))
    w = b2.watch(b"a", b"z", start=2)
    last = w.responses.pop()
    w.responses.append(WatchResponseSeen(last.at, 1, last.revision, last.events[:1]))
    w.responses.append(WatchResponseSeen(last.at, 1, last.revision, last.events[1:]))
    assert names(check_history(b2.finish())) == {"watch-atomic"}


def test_watch_bookmarkable() -> None:
    b = watched()
    w = b.watch(b"a", b"z", start=2)
    w.responses.insert(2, WatchResponseSeen(b.t, 1, 4, progress=True))
    assert names(check_history(b.finish())) == {"watch-bookmarkable"}


def test_watch_reliable_gap() -> None:
    b = watched()
    w = b.watch(b"a", b"z", start=2)
    del w.responses[3]
    assert names(check_history(b.finish())) == {"watch-reliable"}


def test_watch_from_now_must_see_later_events() -> None:
    b = watched()
    w = b.watch(b"a", b"z", start=0)
    b.put(b"a", b"v5")
    b.put(b"a", b"v6")
    ev = b.kv.events_between(b.kv.current_revision, b.kv.current_revision + 1)[0]
    w.responses.append(WatchResponseSeen(b.t, 1, ev.kv.mod_revision, [Event(ev.type, ev.kv)]))
    assert names(check_history(b.finish())) == {"watch-reliable"}


def test_watch_resumable() -> None:
    b = watched()
    w = b.watch(b"a", b"z", start=3)
    del w.responses[1]
    assert names(check_history(b.finish())) == {"watch-resumable"}


def test_watch_prev_kv() -> None:
    b = watched()
    w = b.watch(b"a", b"z", start=2, prev_kv=True)
    ev = w.responses[3].events[0]
    w.responses[3].events[0] = Event(ev.type, ev.kv, None)
    assert names(check_history(b.finish())) == {"watch-prev-kv"}


def test_watch_create_flag() -> None:
    b = watched()
    w = b.watch(b"a", b"z", start=2)
    ev = w.responses[1].events[0]
    w.responses[1].events[0] = Event(EventType.PUT, replace(ev.kv, version=2))
    assert "watch-create-flag" in names(check_history(b.finish()))


def test_watch_compaction_without_compaction() -> None:
    b = watched()
    w = b.watch(b"a", b"z", start=2)
    w.responses.append(WatchResponseSeen(b.tick(), 1, 6, canceled=True, compact_revision=3))
    assert names(check_history(b.finish())) == {"watch-compaction"}


def test_watch_compaction_after_compaction_is_fine() -> None:
    b = watched()
    b.compact(4)
    w = b.watch(b"a", b"z", start=2)
    w.responses[2:] = [WatchResponseSeen(b.tick(), 1, 6, canceled=True, compact_revision=4)]
    assert check_history(b.finish()) == []


def test_watch_history_agree() -> None:
    b = watched()
    b.watch(b"\0", b"\0", start=1, full_history_of=1)
    w2 = b.watch(b"\0", b"\0", start=1, full_history_of=2)
    ev = w2.responses[2].events[0]
    w2.responses[2].events[0] = Event(ev.type, replace(ev.kv, value=b"other"))
    found = names(check_history(b.finish()))
    assert "watch-history-agree" in found


def test_unknown_write_applied_before_it_was_sent() -> None:
    b = base()
    w = b.put(b"c", b"v4", outcome=UNKNOWN)
    r = b.get(b"c", client=4)
    w.call = r.ret + 1.0
    assert "realtime" in names(check_history(b.finish()))
