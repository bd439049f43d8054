"""The MVCC key-value store: etcd v3's data model and request semantics, in memory.

State:
- `_index`: every key with retained history (KeyIndex per key, in key order);
- `_history[i]`: the events of revision `_base + i`, in change (sub revision) order; every
  revision in (compact, current] is there and has at least one event.  Events carry the
  KeyValue written (a tombstone for a delete: key and mod_revision only, as in etcd) and
  prev_kv, the value before the change.  The same Event objects are handed to the watch
  hub, and KeyValues are shared between the index, the history and responses: treat them
  as immutable.
- `_rev`: the current revision (1 for an empty store); `_compact_rev`: the last compaction
  point (-1 before the first compaction, as in etcd, so that compacting to 0 is allowed once).
- `lessor`: the lease table; the store attaches and detaches keys as they are written.

Every write request is validated completely before the first change, so a refused request
changes nothing.  A write transaction takes revision `_rev + 1` and commits it only if it
changed something: a delete that finds nothing or a txn whose branch writes nothing leaves
the revision alone, while a put always bumps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any

from store.api.errors import (
    CompactedError,
    FutureRevisionError,
    KeyNotFoundError,
    LeaseNotFoundError,
)
from store.api.kv import (
    Compare,
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
    ResponseOp,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
)
from store.lease.lessor import Lessor
from store.mvcc import hashing, snapshot
from store.mvcc.compare import compare_all
from store.mvcc.index import Index
from store.mvcc.key_index import KeyIndex
from store.mvcc.keyrange import ALL, check_range, contains
from store.mvcc.revision import INITIAL_REVISION
from store.mvcc.validate import MAX_TXN_OPS, check_delete, check_put, check_range_request, check_txn

_PUT = EventType.PUT
_DELETE = EventType.DELETE

_SORT_KEYS: dict[SortTarget, Callable[[KeyValue], Any]] = {
    SortTarget.KEY: attrgetter("key"),
    SortTarget.VERSION: attrgetter("version"),
    SortTarget.CREATE: attrgetter("create_revision"),
    SortTarget.MOD: attrgetter("mod_revision"),
    SortTarget.VALUE: attrgetter("value"),
}


class KVStore:
    __slots__ = ("_base", "_bytes", "_compact_rev", "_history", "_index", "_live", "_rev", "lessor", "max_txn_ops")

    def __init__(self, lessor: Lessor | None = None, *, max_txn_ops: int = MAX_TXN_OPS) -> None:
        self._index = Index()
        self._history: list[list[Event]] = []
        self._base = INITIAL_REVISION + 1  # revision of _history[0]
        self._rev = INITIAL_REVISION
        self._compact_rev = -1
        self._live = 0  # live keys
        self._bytes = 0  # bytes of live keys and values
        self.lessor = lessor if lessor is not None else Lessor()
        self.max_txn_ops = max_txn_ops

    def __repr__(self) -> str:
        return f"KVStore(revision={self._rev}, compact={self._compact_rev}, keys={len(self._index)})"

    @property
    def current_revision(self) -> int:
        return self._rev

    @property
    def compact_revision(self) -> int:
        """The last compaction point; 0 before any compaction."""
        return max(0, self._compact_rev)

    def key_count(self) -> int:
        """Live keys (for metrics)."""
        return self._live

    def approx_bytes(self) -> int:
        """Bytes of live keys and values, without history or overhead (for metrics)."""
        return self._bytes

    # ================================================================== reads
    def range(self, req: RangeRequest) -> RangeResponse:
        check_range_request(req)
        return self._range(req, self._rev)

    def _range(self, r: RangeRequest, cur: int) -> RangeResponse:
        """etcd's applyRange over the state at `cur`, the newest revision present in the index
        (inside a txn that already wrote, the txn's own revision)."""
        rev = r.revision
        if rev > cur:
            raise FutureRevisionError(cur)
        if rev <= 0:
            rev = cur
        elif rev < self._compact_rev:
            raise CompactedError(self._compact_rev)
        kvs = self._collect(r.key, r.range_end, rev, rev == cur)
        count = len(kvs)
        if r.count_only:
            return RangeResponse(cur, [], False, count)
        limit = r.limit
        filtered = r.min_mod_revision or r.max_mod_revision or r.min_create_revision or r.max_create_revision
        # etcd fetches limit + 1 keys in key order unless it must sort or filter: then it fetches
        # all, filters, sorts, and cuts.  So an implicit sort (order NONE, target not KEY) sorts
        # only the first limit + 1 keys.
        if limit > 0 and r.sort_order is SortOrder.NONE and not filtered and len(kvs) > limit + 1:
            kvs = kvs[: limit + 1]
        if filtered:
            kvs = _prune(r, kvs)
        order = r.sort_order
        if r.sort_target is not SortTarget.KEY and order is SortOrder.NONE:
            order = SortOrder.ASCEND
        if order is not SortOrder.NONE and not (r.sort_target is SortTarget.KEY and order is SortOrder.ASCEND):
            # Stable, like Go's sort.Sort for the <= 12 elements where it uses insertion sort.
            kvs.sort(key=_SORT_KEYS[r.sort_target], reverse=order is SortOrder.DESCEND)
        more = False
        if 0 < limit < len(kvs):
            kvs = kvs[:limit]
            more = True
        if r.keys_only:
            kvs = [KeyValue(kv.key, kv.create_revision, kv.mod_revision, kv.version, b"", kv.lease) for kv in kvs]
        return RangeResponse(cur, kvs, more, count)

    def _collect(self, key: bytes, range_end: bytes, rev: int, latest: bool) -> list[KeyValue]:
        """Live values in [key, range_end) at `rev`, in key order; `latest` when `rev` is the
        newest revision in the index (then each key's last change is the answer)."""
        if not range_end:
            ki = self._index.get(key)
            if ki is None:
                return []
            kv = ki.kvs[-1] if latest else ki.get(rev)
            return [] if kv is None else [kv]
        it = self._index.range(key, None if range_end == ALL else range_end)
        if latest:
            return [kv for ki in it if (kv := ki.kvs[-1]) is not None]
        return [kv for ki in it if (kv := ki.get(rev)) is not None]

    # ================================================================== writes
    def put(self, req: PutRequest) -> tuple[PutResponse, list[Event]]:
        check_put(req)
        if req.lease and req.lease not in self.lessor:  # etcd checks the lease first for a plain put
            raise LeaseNotFoundError(req.lease, "etcdserver: requested lease not found")
        ki = self._index.get(req.key)
        if (req.ignore_value or req.ignore_lease) and (ki is None or ki.kvs[-1] is None):
            raise KeyNotFoundError("etcdserver: key not found")
        rev = self._rev + 1
        changes: list[Event] = []
        prev = self._put(req, rev, ki, changes)
        self._commit(rev, changes)
        return PutResponse(rev, prev if req.prev_kv else None), changes

    def delete_range(self, req: DeleteRangeRequest) -> tuple[DeleteRangeResponse, list[Event]]:
        check_delete(req)
        rev = self._rev + 1
        changes: list[Event] = []
        resp = self._delete(req, rev, changes)
        self._commit(rev, changes)
        return resp, changes

    def txn(self, req: TxnRequest) -> tuple[TxnResponse, list[Event]]:
        check_txn(req, self.max_txn_ops)
        begin = self._rev
        # Every compare, nested ones included, sees the state before the txn (etcd's compareToPath).
        path: list[bool] = []
        self._plan(req, path)
        self._check_path(req, iter(path), begin)
        changes: list[Event] = []
        resp = self._apply_txn(req, iter(path), begin, changes)
        self._commit(begin + 1, changes)
        resp.revision = self._rev
        return resp, changes

    def revoke_lease_keys(self, lease_id: int) -> tuple[int, list[Event]]:
        """Revoke a lease: remove it from the lessor and delete all its keys in one revision
        (in key order, as etcd does, so that every member writes the same sub revisions).
        Returns the store revision afterwards and the delete events (none if it had no keys)."""
        keys = self.lessor.revoke(lease_id)
        rev = self._rev + 1
        changes: list[Event] = []
        for k in keys:
            ki = self._index.get(k)
            if ki is not None and (prev := ki.kvs[-1]) is not None:
                self._tombstone(ki, prev, rev, changes)
        self._commit(rev, changes)
        return self._rev, changes

    def keys_of_lease(self, lease_id: int) -> list[bytes]:
        return self.lessor.keys_of(lease_id)

    # -- write internals ---------------------------------------------------------------
    def _commit(self, rev: int, changes: list[Event]) -> None:
        if changes:
            self._history.append(changes)
            self._rev = rev

    def _put(self, r: PutRequest, rev: int, ki: KeyIndex | None, changes: list[Event]) -> KeyValue | None:
        """Write a put at `rev` (`ki`: the key's index entry, None for a new key); returns prev."""
        key = r.key
        value = r.value
        lease = r.lease
        if ki is None:
            ki = self._index.create(key)
        prev = ki.kvs[-1] if ki.kvs else None
        if prev is None:
            kv = KeyValue(key, rev, rev, 1, value, lease)
            self._live += 1
            self._bytes += len(key) + len(value)
        else:
            if r.ignore_value:
                value = prev.value
            if r.ignore_lease:
                lease = prev.lease
            kv = KeyValue(key, prev.create_revision, rev, prev.version + 1, value, lease)
            self._bytes += len(value) - len(prev.value)
            if prev.lease:
                self.lessor.detach(prev.lease, key)
        ki.revs.append(rev)
        ki.kvs.append(kv)
        changes.append(Event(_PUT, kv, prev))
        if lease:
            self.lessor.attach(lease, key)
        return prev

    def _delete(self, r: DeleteRangeRequest, rev: int, changes: list[Event]) -> DeleteRangeResponse:
        key = r.key
        if not r.range_end:
            ki = self._index.get(key)
            targets = [ki] if ki is not None and ki.kvs[-1] is not None else []
        else:
            it = self._index.range(key, None if r.range_end == ALL else r.range_end)
            targets = [ki for ki in it if ki.kvs[-1] is not None]  # materialized before writing
        prevs: list[KeyValue] = []
        for ki in targets:
            prev = ki.kvs[-1]
            assert prev is not None
            prevs.append(prev)
            self._tombstone(ki, prev, rev, changes)
        # etcd: a delete's revision is the txn's if anything changed so far, else the current one.
        return DeleteRangeResponse(rev if changes else rev - 1, len(prevs), prevs if r.prev_kv else [])

    def _tombstone(self, ki: KeyIndex, prev: KeyValue, rev: int, changes: list[Event]) -> None:
        ki.revs.append(rev)
        ki.kvs.append(None)
        self._live -= 1
        self._bytes -= len(ki.key) + len(prev.value)
        changes.append(Event(_DELETE, KeyValue(ki.key, 0, rev, 0, b"", 0), prev))
        if prev.lease:
            self.lessor.detach(prev.lease, ki.key)

    # -- txn internals -----------------------------------------------------------------
    def _latest(self, key: bytes) -> KeyValue | None:
        ki = self._index.get(key)
        return ki.kvs[-1] if ki is not None else None

    def _compare(self, c: Compare) -> bool:
        if not c.range_end:
            kv = self._latest(c.key)
            return compare_all(c, [] if kv is None else [kv])
        return compare_all(c, self._collect(c.key, c.range_end, self._rev, True))

    def _plan(self, r: TxnRequest, path: list[bool]) -> None:
        """Append, in execution order, which branch each txn on the executed path takes."""
        ok = all(self._compare(c) for c in r.compare)
        path.append(ok)
        for op in r.success if ok else r.failure:
            if isinstance(op, TxnRequest):
                self._plan(op, path)

    def _ops_on_path(self, r: TxnRequest, path: Iterator[bool]) -> Iterator[RequestOp]:
        for op in r.success if next(path) else r.failure:
            if isinstance(op, TxnRequest):
                yield from self._ops_on_path(op, path)
            else:
                yield op

    def _check_path(self, r: TxnRequest, path: Iterator[bool], begin: int) -> None:
        """etcd's checkRequests: first every put on the executed path, then every range."""
        ops = list(self._ops_on_path(r, path))
        for op in ops:
            if isinstance(op, PutRequest):
                if (op.ignore_value or op.ignore_lease) and self._latest(op.key) is None:
                    raise KeyNotFoundError("etcdserver: key not found")
                if op.lease and op.lease not in self.lessor:
                    raise LeaseNotFoundError(op.lease, "etcdserver: requested lease not found")
        for op in ops:
            if isinstance(op, RangeRequest) and op.revision:
                if op.revision > begin:
                    raise FutureRevisionError(begin)
                if op.revision < self._compact_rev:
                    raise CompactedError(self._compact_rev)

    def _apply_txn(self, r: TxnRequest, path: Iterator[bool], begin: int, changes: list[Event]) -> TxnResponse:
        ok = next(path)
        responses: list[ResponseOp] = []
        rev = begin + 1
        for op in r.success if ok else r.failure:
            if isinstance(op, PutRequest):
                prev = self._put(op, rev, self._index.get(op.key), changes)
                responses.append(PutResponse(rev, prev if op.prev_kv else None))
            elif isinstance(op, RangeRequest):
                responses.append(self._range(op, rev if changes else begin))
            elif isinstance(op, DeleteRangeRequest):
                responses.append(self._delete(op, rev, changes))
            else:
                responses.append(self._apply_txn(op, path, begin, changes))
        # A nested txn's revision stays 0, as in etcd (only the outer response has a header).
        return TxnResponse(0, ok, responses)

    # ================================================================== compaction, history
    def compact(self, revision: int) -> None:
        """Forget history before `revision`: reads at older revisions fail with CompactedError.
        The value of every key at `revision` itself stays readable."""
        if revision <= self._compact_rev:
            raise CompactedError(self.compact_revision)
        if revision > self._rev:
            raise FutureRevisionError(self._rev)
        n = revision + 1 - self._base
        if n > 0:
            dropped = self._history[:n]
            del self._history[:n]
            self._base += n
            # Only keys changed since the last compaction can have something to drop.
            self._index.compact(revision, {ev.kv.key for evs in dropped for ev in evs})
        self._compact_rev = revision

    def events_between(
        self, start_rev: int, end_rev: int, key: bytes | None = None, range_end: bytes = b"", limit: int = 0
    ) -> list[Event]:
        """Events of revisions in [start_rev, end_rev), ordered by (revision, sub), with prev_kv.

        `key` None means every key; otherwise [key, range_end) in etcd's encoding.  `limit` > 0
        stops after the revision in which the result reaches `limit` events (a revision is never
        split): when the result has >= limit events, continue from its last revision + 1.
        A start at or below the compaction point raises CompactedError: that history is gone.
        """
        if self._compact_rev > 0 and start_rev <= self._compact_rev:
            raise CompactedError(self._compact_rev)
        if key is not None:
            check_range(key, range_end)
        base = self._base
        lo = max(start_rev, base) - base
        hi = min(end_rev, self._rev + 1) - base
        out: list[Event] = []
        if lo >= hi:
            return out
        for evs in self._history[lo:hi]:
            if key is None:
                out.extend(evs)
            else:
                out.extend(ev for ev in evs if contains(key, range_end, ev.kv.key))
            if 0 < limit <= len(out):
                break
        return out

    # ================================================================== hash, snapshot
    def hash_kv(self, revision: int = 0) -> tuple[int, int]:
        """A CRC-32 of every retained change at or below `revision` (0: current), in key then
        revision order, and the compact revision: equal on members with equal state."""
        if revision > 0 and revision <= self._compact_rev:
            raise CompactedError(self._compact_rev)
        if revision > self._rev:
            raise FutureRevisionError(self._rev)
        return hashing.hash_index(self._index, revision if revision > 0 else self._rev), self.compact_revision

    def snapshot(self) -> bytes:
        """The whole replicated state (keys, history, compaction point, leases) as msgpack."""
        kept: list[KeyValue] = []
        for ki in self._index:
            if ki.revs[0] < self._base:  # at most one: the newest put at or before the compaction
                kv = ki.kvs[0]
                assert kv is not None
                kept.append(kv)
        return snapshot.encode(self._rev, self._compact_rev, kept, self._history, self.lessor.entries())

    @classmethod
    def restore(
        cls, data: bytes, *, lessor: Lessor | None = None, now: float = 0.0, max_txn_ops: int = MAX_TXN_OPS
    ) -> KVStore:
        """A store equal to the one that produced `data`.  The lessor (a new one by default) gets
        the snapshot's leases, and the keys are re-attached to them."""
        snap = snapshot.decode(data)
        lessor = lessor if lessor is not None else Lessor()
        lessor.load(snap.leases, now)
        s = cls(lessor, max_txn_ops=max_txn_ops)
        s._compact_rev = snap.compact
        s._base = max(snap.compact + 1, INITIAL_REVISION + 1)
        for kv in snap.kept:
            s._index.create(kv.key).put(kv.mod_revision, kv)
            s._live += 1
            s._bytes += len(kv.key) + len(kv.value)
            if kv.lease:
                lessor.attach(kv.lease, kv.key)
        s._rev = s._base - 1
        rev = s._base
        for changes in snap.history:
            evs: list[Event] = []
            for ch in changes:
                if len(ch) == 1:
                    ki = s._index.get(ch[0])
                    assert ki is not None
                    prev = ki.kvs[-1]
                    assert prev is not None
                    s._tombstone(ki, prev, rev, evs)
                else:
                    s._put(PutRequest(ch[0], ch[1], ch[2]), rev, s._index.get(ch[0]), evs)
            s._history.append(evs)
            s._rev = rev
            rev += 1
        if s._rev != snap.revision:
            raise ValueError(f"snapshot is inconsistent: history ends at {s._rev}, header says {snap.revision}")
        return s


def _prune(r: RangeRequest, kvs: list[KeyValue]) -> list[KeyValue]:
    if r.max_mod_revision:
        kvs = [kv for kv in kvs if kv.mod_revision <= r.max_mod_revision]
    if r.min_mod_revision:
        kvs = [kv for kv in kvs if kv.mod_revision >= r.min_mod_revision]
    if r.max_create_revision:
        kvs = [kv for kv in kvs if kv.create_revision <= r.max_create_revision]
    if r.min_create_revision:
        kvs = [kv for kv in kvs if kv.create_revision >= r.min_create_revision]
    return kvs
