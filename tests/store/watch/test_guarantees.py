"""etcd's watch guarantees, checked on every response under random writes, watches, drains,
catch-ups, overflows (tiny buffers), compactions, cancels and progress requests.

Per watcher: the events received are exactly the expected stream (every event of a matching
key at or after the start revision, after the filters, prev_kv only if asked) read in order:
ordered, no duplicates, no gaps; every response holds whole revisions (atomic); a response's
revision never claims a revision whose events were not delivered, and never goes backwards
(bookmarks are safe); a canceled-for-compaction watcher really needed compacted history.
At the end, once the hub is settled, every open watcher has received its whole stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from store.api.kv import DeleteRangeRequest, Event, EventType, PutRequest, RequestOp, TxnRequest, prefix_end
from store.api.watch import WatchFilter, WatchResponse
from tests.store.watch.rig import Rig

KEYS = [b"a", b"ab", b"b", b"c"]


@dataclass
class Spec:
    key: bytes
    end: bytes
    start: int
    prev_kv: bool
    filters: list[WatchFilter]
    received: list[Event] = field(default_factory=list)
    responses: int = 0
    last_revision: int = 0
    closed: bool = False

    def matches(self, ev: Event) -> bool:
        k = ev.kv.key
        if not self.end:
            inside = k == self.key
        elif self.end == b"\0":
            inside = k >= self.key
        else:
            inside = self.key <= k < self.end
        if ev.type is EventType.PUT and WatchFilter.NOPUT in self.filters:
            return False
        if ev.type is EventType.DELETE and WatchFilter.NODELETE in self.filters:
            return False
        return inside and ev.kv.mod_revision >= self.start


def _view(ev: Event, prev_kv: bool) -> tuple[object, ...]:
    return (ev.type, ev.kv, ev.prev_kv if prev_kv else None)


class WatchGuarantees(RuleBasedStateMachine):
    @initialize(buffer=st.integers(1, 6), sync_revisions=st.integers(1, 4))
    def setup(self, buffer: int, sync_revisions: int) -> None:
        self.rig = Rig(buffer_events=buffer, sync_revisions=sync_revisions)
        self.log: list[Event] = []  # every event ever, kept here because compaction drops history
        self.specs: dict[int, Spec] = {}

    # ------------------------------------------------------------------ writes
    def _record(self, events: list[Event]) -> None:
        self.log.extend(events)

    @rule(key=st.sampled_from(KEYS), value=st.binary(max_size=2))
    def put(self, key: bytes, value: bytes) -> None:
        self._record(self.rig.put(key, value))

    @rule(key=st.sampled_from(KEYS), prefix=st.booleans())
    def delete(self, key: bytes, prefix: bool) -> None:
        self._record(self.rig.delete(key, prefix_end(key) if prefix else b""))

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True), drop=st.booleans())
    def txn(self, keys: list[bytes], drop: bool) -> None:
        ops: list[RequestOp] = [DeleteRangeRequest(k) if drop else PutRequest(k, b"t") for k in keys]
        self._record(self.rig.txn(TxnRequest([], ops)))

    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        kv = self.rig.kv
        if kv.compact_revision < kv.current_revision:
            kv.compact(data.draw(st.integers(kv.compact_revision + 1, kv.current_revision)))

    # ------------------------------------------------------------------ watchers
    @rule(
        key=st.sampled_from(KEYS),
        end=st.sampled_from(["single", "prefix", "all"]),
        data=st.data(),
        prev_kv=st.booleans(),
        filters=st.lists(st.sampled_from(list(WatchFilter)), max_size=1),
    )
    def watch(self, key: bytes, end: str, data: st.DataObject, prev_kv: bool, filters: list[WatchFilter]) -> None:
        cur = self.rig.kv.current_revision
        start = data.draw(st.one_of(st.just(0), st.integers(1, cur + 3)))
        range_end = {"single": b"", "prefix": prefix_end(key), "all": b"\0"}[end]
        wid = self.rig.watch(key, range_end, start_revision=start, prev_kv=prev_kv, filters=filters)
        assert wid not in self.specs
        self.specs[wid] = Spec(key, range_end, start or cur + 1, prev_kv, filters)

    @precondition(lambda self: any(not s.closed for s in self.specs.values()))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from(sorted(w for w, s in self.specs.items() if not s.closed)))
        self.rig.hub.cancel(wid)
        del self.specs[wid]

    @rule(data=st.data())
    def progress(self, data: st.DataObject) -> None:
        ids = sorted(self.specs)
        self.rig.hub.request_progress(data.draw(st.sampled_from([0, *ids])))

    @rule(max_revisions=st.integers(1, 4))
    def sync(self, max_revisions: int) -> None:
        self.rig.hub.sync_unsynced(max_revisions)

    @rule(max_events=st.integers(1, 5))
    def drain(self, max_events: int) -> None:
        for r in self.rig.hub.drain(max_events):
            self._check(r)

    # ------------------------------------------------------------------ checks
    def _expected(self, spec: Spec) -> list[Event]:
        return [ev for ev in self.log if spec.matches(ev)]

    def _check(self, r: WatchResponse) -> None:
        spec = self.specs.get(r.watch_id)
        assert spec is not None, f"a response for a canceled or unknown watch: {r}"
        assert not spec.closed, f"a response after the watch ended: {r}"
        spec.responses += 1
        if spec.responses == 1:
            assert r.created, f"the first response must be the created one: {r}"
        else:
            assert not r.created
        expected = self._expected(spec)
        if r.canceled:
            # only compaction ends a watch the client did not cancel: it must have been needed
            assert r.compact_revision > 0
            next_needed = spec.received[-1].kv.mod_revision + 1 if spec.received else spec.start
            assert next_needed <= r.compact_revision
            assert not r.events
            spec.closed = True
            return
        if r.created:
            return
        pos = len(spec.received)
        got = [_view(e, spec.prev_kv) for e in r.events]
        assert got == [_view(e, spec.prev_kv) for e in expected[pos : pos + len(r.events)]], "gap or duplicate"
        if not spec.prev_kv:
            assert all(e.prev_kv is None for e in r.events)
        spec.received.extend(r.events)
        if r.events:
            # atomic: the response ends at a revision boundary of the expected stream
            last = r.events[-1].kv.mod_revision
            rest = expected[len(spec.received) :]
            assert not rest or rest[0].kv.mod_revision != last, "a revision was split across responses"
            assert r.revision >= last
        # honest revision: every expected event at or below it has been delivered
        assert all(ev.kv.mod_revision > r.revision for ev in expected[len(spec.received) :]), (
            f"response claims revision {r.revision} but events at or below it are missing: {r}"
        )
        assert r.revision >= spec.last_revision, "response revisions went backwards"
        spec.last_revision = r.revision

    @invariant()
    def bounded_buffers(self) -> None:
        if not hasattr(self, "rig"):
            return
        hub = self.rig.hub
        for wid in self.specs:
            w = hub.get(wid)
            if w is not None and len(w.buffer) > hub.buffer_events:
                # only a single revision bigger than the buffer may exceed it
                assert len({e.kv.mod_revision for e in w.buffer}) == 1

    def teardown(self) -> None:
        if not hasattr(self, "rig"):
            return
        hub = self.rig.hub
        for _ in range(10_000):
            hub.sync_unsynced()
            for r in hub.drain(7):
                self._check(r)
            if not hub.unsynced_count() and not hub.pending():
                break
        assert not hub.unsynced_count() and not hub.pending()
        for wid, spec in self.specs.items():
            if not spec.closed:
                want = [_view(e, spec.prev_kv) for e in self._expected(spec)]
                assert [_view(e, spec.prev_kv) for e in spec.received] == want, f"watch {wid} is incomplete"


TestWatchGuarantees = WatchGuarantees.TestCase
TestWatchGuarantees.settings = settings(
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
