"""KVStore against a deliberately naive reference model, driven by hypothesis.

The model keeps a full copy of the live state at every revision and the list of events of
every revision, so each read is a dict filter and each write a dict copy: obviously right,
hopelessly slow.  Rules: put, delete range, txn (compare + two branches of writes and reads),
compact, range at any revision, events between revisions, and snapshot/restore (the test
continues on the restored store, so later steps also check the restored state).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from store.api.errors import CompactedError, DuplicateKeyError, FutureRevisionError, InvalidRangeError, StoreError
from store.api.kv import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    Event,
    EventType,
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    RequestOp,
    TxnRequest,
    prefix_end,
)
from store.mvcc import KVStore
from tests.store.mvcc.util import fingerprint

KEYS = [b"a", b"ab", b"b", b"c", b"c\x00"]
VALUES = [b"", b"0", b"1", b"22"]
key_st = st.sampled_from(KEYS)


@st.composite
def ranges(draw: st.DrawFn) -> tuple[bytes, bytes]:
    key = draw(key_st)
    end = draw(st.sampled_from([b"", b"\0", prefix_end(key), *KEYS]))
    return key, end


def in_range(key: bytes, end: bytes, k: bytes) -> bool:
    if not end:
        return k == key
    if end == b"\0":
        return k >= key
    return key <= k < end


def inverted(key: bytes, end: bytes) -> bool:
    return bool(end) and end != b"\0" and end < key


@dataclass
class Model:
    rev: int = 1
    compact: int = -1
    states: dict[int, dict[bytes, KeyValue]] = field(default_factory=lambda: {1: {}})
    events: dict[int, list[Event]] = field(default_factory=dict)

    def state(self) -> dict[bytes, KeyValue]:
        return self.states[self.rev]

    def commit(self, state: dict[bytes, KeyValue], events: list[Event]) -> None:
        if events:
            self.rev += 1
            self.states[self.rev] = state
            self.events[self.rev] = events

    def range(self, key: bytes, end: bytes, rev: int) -> list[KeyValue]:
        state = self.states[rev]
        return [state[k] for k in sorted(state) if in_range(key, end, k)]


def put_into(state: dict[bytes, KeyValue], rev: int, key: bytes, value: bytes, events: list[Event]) -> KeyValue | None:
    prev = state.get(key)
    kv = KeyValue(key, prev.create_revision if prev else rev, rev, prev.version + 1 if prev else 1, value)
    state[key] = kv
    events.append(Event(EventType.PUT, kv, prev))
    return prev


def delete_from(state: dict[bytes, KeyValue], rev: int, key: bytes, end: bytes, events: list[Event]) -> int:
    gone = sorted(k for k in state if in_range(key, end, k))
    for k in gone:
        events.append(Event(EventType.DELETE, KeyValue(k, 0, rev, 0, b""), state.pop(k)))
    return len(gone)


def conflicting(ops: list[RequestOp]) -> bool:
    writes = [op for op in ops if isinstance(op, PutRequest | DeleteRangeRequest)]
    for i, a in enumerate(writes):
        for b in writes[i + 1 :]:
            p, o = (a, b) if isinstance(a, PutRequest) else (b, a)
            if not isinstance(p, PutRequest):
                continue  # two deletes may overlap
            if isinstance(o, PutRequest) and o.key == p.key:
                return True
            if isinstance(o, DeleteRangeRequest) and in_range(o.key, o.range_end, p.key):
                return True
    return False


@st.composite
def txn_ops(draw: st.DrawFn) -> list[RequestOp]:
    ops: list[RequestOp] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["put", "del", "range"]))
        key, end = draw(ranges())
        if inverted(key, end):
            end = b""
        if kind == "put":
            ops.append(PutRequest(key, draw(st.sampled_from(VALUES)), prev_kv=draw(st.booleans())))
        elif kind == "del":
            ops.append(DeleteRangeRequest(key, end, prev_kv=draw(st.booleans())))
        else:
            ops.append(RangeRequest(key, end))
    return ops


class KVStoreVsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.s = KVStore()
        self.m = Model()

    # ------------------------------------------------------------------ writes
    @rule(key=key_st, value=st.sampled_from(VALUES), prev_kv=st.booleans())
    def put(self, key: bytes, value: bytes, prev_kv: bool) -> None:
        resp, events = self.s.put(PutRequest(key, value, prev_kv=prev_kv))
        state, evs = dict(self.m.state()), list[Event]()
        prev = put_into(state, self.m.rev + 1, key, value, evs)
        self.m.commit(state, evs)
        assert resp == PutResponse(self.m.rev, prev if prev_kv else None)
        assert events == evs

    @rule(r=ranges(), prev_kv=st.booleans())
    def delete(self, r: tuple[bytes, bytes], prev_kv: bool) -> None:
        key, end = r
        if inverted(key, end):
            before = fingerprint(self.s)
            try:
                self.s.delete_range(DeleteRangeRequest(key, end))
            except InvalidRangeError:
                assert fingerprint(self.s) == before
                return
            raise AssertionError("an inverted range was accepted")
        resp, events = self.s.delete_range(DeleteRangeRequest(key, end, prev_kv=prev_kv))
        state, evs = dict(self.m.state()), list[Event]()
        n = delete_from(state, self.m.rev + 1, key, end, evs)
        self.m.commit(state, evs)
        assert resp == DeleteRangeResponse(self.m.rev, n, [e.prev_kv for e in evs if e.prev_kv] if prev_kv else [])
        assert events == evs

    @rule(
        key=key_st,
        what=st.sampled_from([CompareTarget.VERSION, CompareTarget.MOD, CompareTarget.CREATE, CompareTarget.VALUE]),
        result=st.sampled_from(list(CompareResult)),
        number=st.integers(0, 6),
        value=st.sampled_from(VALUES),
        success=txn_ops(),
        failure=txn_ops(),
    )
    def txn(
        self,
        key: bytes,
        what: CompareTarget,
        result: CompareResult,
        number: int,
        value: bytes,
        success: list[RequestOp],
        failure: list[RequestOp],
    ) -> None:
        target = what
        c = Compare(result, target, key, value if target is CompareTarget.VALUE else number)
        req = TxnRequest([c], success, failure)
        if conflicting(success) or conflicting(failure):
            before = fingerprint(self.s)
            try:
                self.s.txn(req)
            except DuplicateKeyError:
                assert fingerprint(self.s) == before
                return
            raise AssertionError("conflicting writes were accepted")
        resp, events = self.s.txn(req)
        kv = self.m.state().get(key)
        if kv is None:
            ok = target is not CompareTarget.VALUE and _holds(0, result, number)
        else:
            attr: int | bytes = {
                CompareTarget.VERSION: kv.version,
                CompareTarget.MOD: kv.mod_revision,
                CompareTarget.CREATE: kv.create_revision,
                CompareTarget.VALUE: kv.value,
            }[target]  # type: ignore[assignment]
            ok = _holds(attr, result, value if target is CompareTarget.VALUE else number)
        state, evs = dict(self.m.state()), list[Event]()
        rev = self.m.rev + 1
        expected: list[object] = []
        for op in success if ok else failure:
            if isinstance(op, PutRequest):
                prev = put_into(state, rev, op.key, op.value, evs)
                expected.append(PutResponse(rev, prev if op.prev_kv else None))
            elif isinstance(op, DeleteRangeRequest):
                first = len(evs)
                n = delete_from(state, rev, op.key, op.range_end, evs)
                prevs = [e.prev_kv for e in evs[first:] if e.prev_kv] if op.prev_kv else []
                expected.append(DeleteRangeResponse(rev if evs else rev - 1, n, prevs))
            elif isinstance(op, RangeRequest):
                kvs = [state[k] for k in sorted(state) if in_range(op.key, op.range_end, k)]
                expected.append(RangeResponse(rev if evs else rev - 1, kvs, False, len(kvs)))
        self.m.commit(state, evs)
        assert resp.succeeded == ok
        assert resp.revision == self.m.rev
        assert resp.responses == expected
        assert events == evs

    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        r = data.draw(st.integers(-1, self.m.rev + 1))
        before = fingerprint(self.s)
        if r <= self.m.compact:
            try:
                self.s.compact(r)
            except CompactedError as e:
                assert e.compact_revision == max(0, self.m.compact)
                assert fingerprint(self.s) == before
                return
            raise AssertionError("compacted twice to the same point")
        if r > self.m.rev:
            try:
                self.s.compact(r)
            except FutureRevisionError:
                assert fingerprint(self.s) == before
                return
            raise AssertionError("compacted to a future revision")
        self.s.compact(r)
        self.m.compact = r

    # ------------------------------------------------------------------ reads
    @rule(r=ranges(), data=st.data(), limit=st.integers(0, 3))
    def range_at(self, r: tuple[bytes, bytes], data: st.DataObject, limit: int) -> None:
        key, end = r
        rev = data.draw(st.integers(0, self.m.rev + 1))
        req = RangeRequest(key, end, revision=rev, limit=limit)
        try:
            resp: RangeResponse | StoreError = self.s.range(req)
        except StoreError as e:
            resp = e
        if inverted(key, end):
            assert isinstance(resp, InvalidRangeError)
        elif rev > self.m.rev:
            assert isinstance(resp, FutureRevisionError)
        elif 0 < rev < self.m.compact:
            assert isinstance(resp, CompactedError)
        else:
            kvs = self.m.range(key, end, rev or self.m.rev)
            more = 0 < limit < len(kvs)
            assert resp == RangeResponse(self.m.rev, kvs[:limit] if more else kvs, more, len(kvs))

    @rule(data=st.data(), key=st.one_of(st.none(), key_st), prefix=st.booleans(), limit=st.integers(0, 4))
    def history(self, data: st.DataObject, key: bytes | None, prefix: bool, limit: int) -> None:
        start = data.draw(st.integers(1, self.m.rev + 1))
        end = data.draw(st.integers(start, self.m.rev + 2))
        range_end = prefix_end(key) if key is not None and prefix else b""
        if self.m.compact > 0 and start <= self.m.compact:
            try:
                self.s.events_between(start, end, key, range_end, limit)
            except CompactedError:
                return
            raise AssertionError("history below the compaction point was served")
        got = self.s.events_between(start, end, key, range_end, limit)
        want = [
            ev
            for rev in range(start, min(end, self.m.rev + 1))
            for ev in self.m.events.get(rev, [])
            if key is None or in_range(key, range_end, ev.kv.key)
        ]
        if limit and len(want) > limit:
            cut = want[limit - 1].kv.mod_revision
            want = [ev for ev in want if ev.kv.mod_revision <= cut]
        assert got == want

    # ------------------------------------------------------------------ snapshot
    @precondition(lambda self: self.m.rev > 1)
    @rule()
    def snapshot_restore(self) -> None:
        t = KVStore.restore(self.s.snapshot())
        assert fingerprint(t) == fingerprint(self.s)
        first = max(self.m.compact + 1, 2)
        assert t.events_between(first, self.m.rev + 1) == self.s.events_between(first, self.m.rev + 1)
        self.s = t

    # ------------------------------------------------------------------ invariants
    @invariant()
    def same_state(self) -> None:
        assert self.s.current_revision == self.m.rev
        assert self.s.compact_revision == max(0, self.m.compact)
        live = self.s.range(RangeRequest(b"\0", b"\0")).kvs
        assert live == self.m.range(b"\0", b"\0", self.m.rev)
        assert self.s.key_count() == len(live)


def _holds(a: int | bytes, result: CompareResult, b: int | bytes) -> bool:
    if result is CompareResult.EQUAL:
        return a == b
    if result is CompareResult.NOT_EQUAL:
        return a != b
    if result is CompareResult.GREATER:
        return a > b  # type: ignore[operator]
    return a < b  # type: ignore[operator]


TestKVStoreVsModel = KVStoreVsModel.TestCase
TestKVStoreVsModel.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
