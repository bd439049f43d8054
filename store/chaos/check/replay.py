"""The reference state: every applied entry replayed, in index order, through our pure MVCC.

Compactions are recorded but not performed, so every revision stays readable: the checks
ask "what did range R hold at revision N", "which events made revision N", "where was this
unique value written".  The replay trusts only the entries' data, never the revisions members
reported; comparing the two is the applied-agreement check's job.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import msgpack

from store.api.errors import CompactedError, FutureRevisionError, StoreError
from store.api.kv import (
    CompactionRequest,
    CompactionResponse,
    DeleteRangeRequest,
    Event,
    EventType,
    KeyValue,
    PutRequest,
    RangeRequest,
    RangeResponse,
    TxnRequest,
)
from store.chaos.check.common import put_values
from store.chaos.history import Applied, AppliedEntry
from store.lease.lessor import Lessor
from store.mvcc.kvstore import KVStore
from store.raft.types import EntryType


@dataclass(slots=True)
class ReplayedEntry:
    """One applied client entry and what our store made of it."""

    index: int
    origin: int
    seq: int
    kind: str
    request: Any
    """The decoded request (PutRequest, ...); lease entries keep their raw args list."""
    result: Any
    """The response object, or the StoreError every member refused it with."""
    revision: int
    """Store revision after applying it (per the replay)."""
    at: float


@dataclass(slots=True)
class LeaseRevoke:
    entry: ReplayedEntry
    lease: int
    expired: bool
    """Proposed by the leader because the lease ran out (origin seq 0), not by a client."""
    deleted: list[bytes]
    """Keys the revoke deleted, per the replay's events."""


_DECODERS: dict[str, Any] = {
    "put": PutRequest.from_wire,
    "delete_range": DeleteRangeRequest.from_wire,
    "txn": TxnRequest.from_wire,
    "compact": CompactionRequest.from_wire,
}


class Replay:
    """Built once per history; every query is a read of the retained MVCC history."""

    def __init__(self, applied: Applied) -> None:
        self.kv = KVStore(Lessor(min_ttl=1))
        self.entries: list[ReplayedEntry] = []
        self.by_revision: dict[int, ReplayedEntry] = {}
        self.value_at: dict[bytes, list[tuple[int, bytes]]] = {}
        """Unique value -> every (revision, key) it was written at."""
        self.lease_grants: dict[int, ReplayedEntry] = {}
        self.lease_revokes: list[LeaseRevoke] = []
        self.revision_mismatches: list[tuple[AppliedEntry, int]] = []
        """Entries whose logged revision differs from the replay's (entry, replayed revision)."""
        self.unreadable: list[AppliedEntry] = []
        self._compacted = -1
        for entry in applied.entries.values():
            self._apply(entry)

    # ------------------------------------------------------------------ building
    def _apply(self, entry: AppliedEntry) -> None:
        if entry.entry_type == EntryType.NORMAL and entry.data:
            try:
                origin, seq, kind, args = msgpack.unpackb(entry.data, raw=False)
                decoder = _DECODERS.get(kind)
                request = decoder(args) if decoder is not None else args
            except Exception:
                self.unreadable.append(entry)
                return
            before = self.kv.current_revision
            try:
                result = self._execute(kind, request)
            except StoreError as e:
                result = e
            after = self.kv.current_revision
            done = ReplayedEntry(entry.index, int(origin), int(seq), kind, request, result, after, entry.at)
            self.entries.append(done)
            if after != before:
                self.by_revision[after] = done
                self._index_values(after, set(put_values(request)))
            if kind == "lease_revoke" and not isinstance(result, StoreError):
                deleted = [ev.kv.key for ev in self.events(after)] if after != before else []
                self.lease_revokes.append(LeaseRevoke(done, int(request[0]), int(seq) == 0, deleted))
            elif kind == "lease_grant" and not isinstance(result, StoreError):
                self.lease_grants[int(request[0])] = done
        if entry.revision != self.kv.current_revision:
            self.revision_mismatches.append((entry, self.kv.current_revision))

    def _execute(self, kind: str, request: Any) -> Any:
        kv = self.kv
        if kind == "put":
            return kv.put(request)[0]
        if kind == "delete_range":
            return kv.delete_range(request)[0]
        if kind == "txn":
            return kv.txn(request)[0]
        if kind == "compact":
            # Validated as the store would, but not performed: every revision stays readable.
            if request.revision <= self._compacted:
                raise CompactedError(max(0, self._compacted))
            if request.revision > kv.current_revision:
                raise FutureRevisionError(kv.current_revision)
            self._compacted = request.revision
            return CompactionResponse(kv.current_revision)
        if kind == "lease_grant":
            return kv.lessor.grant(int(request[0]), int(request[1]), 0.0)
        if kind == "lease_revoke":
            return kv.revoke_lease_keys(int(request[0]))
        raise ValueError(f"unknown entry kind {kind!r}")

    def _index_values(self, revision: int, sent: set[bytes]) -> None:
        """Record where the values the entry's requests carried were written (a put with
        ignore_value re-writes an old value: that is not a new write of it)."""
        for ev in self.events(revision):
            if ev.type is EventType.PUT and ev.kv.value in sent:
                self.value_at.setdefault(ev.kv.value, []).append((revision, ev.kv.key))

    # ------------------------------------------------------------------ queries
    @property
    def final_revision(self) -> int:
        return self.kv.current_revision

    def compactions(self) -> list[tuple[int, float]]:
        """(revision compacted to, applied time) of each compaction entry, in apply order."""
        return [
            (e.request.revision, e.at)
            for e in self.entries
            if e.kind == "compact" and not isinstance(e.result, StoreError)
        ]

    def range(self, req: RangeRequest, revision: int) -> RangeResponse | None:
        """`req` served from the state at `revision` (None beyond the last revision)."""
        if revision > self.kv.current_revision or revision < 1:
            return None
        return self.kv.range(replace(req, revision=revision))

    def get(self, key: bytes, revision: int) -> KeyValue | None:
        resp = self.range(RangeRequest(key), revision)
        return resp.kvs[0] if resp is not None and resp.kvs else None

    def events(self, revision: int) -> list[Event]:
        return self.kv.events_between(revision, revision + 1)

    def events_between(self, start: int, end: int, key: bytes, range_end: bytes) -> list[Event]:
        """Events of revisions [start, end) on [key, range_end), in order."""
        return self.kv.events_between(max(start, 2), end, key, range_end)

    def revisions_of(self, value: bytes) -> list[tuple[int, bytes]]:
        """Every (revision, key) at which `value` was written."""
        return self.value_at.get(value, [])
