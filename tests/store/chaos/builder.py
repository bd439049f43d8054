"""Synthetic chaos histories: a sequential store that records what a run would have recorded.

Every write goes through a real KVStore, becomes an applied entry (msgpack
[origin, seq, kind, args], as members log them) and an Operation with the store's answer,
so a history built here is clean by construction; tests then break one thing in it.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack

from store.api.kv import (
    CompactionRequest,
    CompactionResponse,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    TxnRequest,
)
from store.api.lease import LeaseGrantResponse, LeaseKeepAliveResponse
from store.chaos.history import (
    FAIL,
    OK,
    UNKNOWN,
    AppliedEntry,
    History,
    Operation,
    WatchRecord,
    WatchResponseSeen,
)
from store.lease.lessor import Lessor
from store.mvcc.kvstore import KVStore


def entry_data(kind: str, args: Any, origin: int = 1, seq: int = 1) -> bytes:
    data: bytes = msgpack.packb([origin, seq, kind, args], use_bin_type=True)
    return data


class Builder:
    """Time advances 10 ms per step; every member applies every entry."""

    def __init__(self, members: tuple[int, ...] = (1, 2, 3)) -> None:
        self.kv = KVStore(Lessor(min_ttl=1))
        self.history = History()
        self.members = list(members)
        self.t = 100.0
        self.index = 1
        self.seqs: dict[int, int] = {}
        self.compacted = 0

    # ------------------------------------------------------------------ plumbing
    def tick(self, dt: float = 0.01) -> float:
        self.t += dt
        return self.t

    def apply(self, kind: str, args: Any, origin: int = 1, seq: int = 1, at: float | None = None) -> Any:
        """Append an applied entry and return what the store answered."""
        kv = self.kv
        result: Any
        if kind == "put":
            result = kv.put(PutRequest.from_wire(args))[0]
        elif kind == "delete_range":
            result = kv.delete_range(DeleteRangeRequest.from_wire(args))[0]
        elif kind == "txn":
            result = kv.txn(TxnRequest.from_wire(args))[0]
        elif kind == "compact":
            self.compacted = args[0]
            result = CompactionResponse(kv.current_revision)
        elif kind == "lease_grant":
            kv.lessor.grant(args[0], args[1], 0.0)
            result = LeaseGrantResponse(kv.current_revision, args[0], args[1])
        elif kind == "lease_revoke":
            result = kv.revoke_lease_keys(args[0])[0]
        else:
            raise ValueError(kind)
        self.index += 1
        when = self.tick() if at is None else at
        self.history.applied.entries[self.index] = AppliedEntry(
            self.index, 1, 0, entry_data(kind, args, origin, seq), kv.current_revision, when, list(self.members)
        )
        return result

    def _op(self, client: int, kind: str, request: Any, call: float, **kw: Any) -> Operation:
        seq = self.seqs.get(client, 0)
        self.seqs[client] = seq + 1
        op = Operation(client, seq, kind, request, call, **kw)
        self.history.operations.append(op)
        return op

    def write(
        self, request: Any, client: int = 1, outcome: str = OK, applied: bool = True, member: int = 1
    ) -> Operation:
        """A put / delete_range / txn / compact through the log."""
        call = self.tick()
        result = self.apply(request.kind, request.to_wire()) if applied else None
        if outcome == OK:
            return self._op(
                client,
                request.kind,
                request,
                call,
                ret=self.tick(),
                outcome=OK,
                response=result,
                member=member,
                revision=result.revision,
            )
        if outcome == FAIL:
            return self._op(client, request.kind, request, call, ret=self.tick(), outcome=FAIL, error="NoLeader")
        return self._op(client, request.kind, request, call, ret=math.inf, outcome=UNKNOWN, error="Timeout")

    # ------------------------------------------------------------------ KV
    def put(self, key: bytes, value: bytes, **kw: Any) -> Operation:
        lease = kw.pop("lease", 0)
        prev_kv = kw.pop("prev_kv", False)
        return self.write(PutRequest(key, value, lease, prev_kv), **kw)

    def delete(self, key: bytes, range_end: bytes = b"", prev_kv: bool = False, **kw: Any) -> Operation:
        return self.write(DeleteRangeRequest(key, range_end, prev_kv), **kw)

    def txn(self, req: TxnRequest, **kw: Any) -> Operation:
        return self.write(req, **kw)

    def compact(self, revision: int, **kw: Any) -> Operation:
        return self.write(CompactionRequest(revision), **kw)

    def read(self, req: RangeRequest, client: int = 2, member: int = 1, endpoint: str = "") -> Operation:
        call = self.tick()
        resp = self.kv.range(req)
        return self._op(
            client,
            "range",
            req,
            call,
            ret=self.tick(),
            outcome=OK,
            response=resp,
            member=member,
            revision=resp.revision,
            endpoint=endpoint,
        )

    def get(self, key: bytes, **kw: Any) -> Operation:
        return self.read(RangeRequest(key), **kw)

    # ------------------------------------------------------------------ leases
    def grant(self, lease: int, ttl: int, client: int = 3) -> Operation:
        call = self.tick()
        resp = self.apply("lease_grant", [lease, ttl])
        return self._op(
            client,
            "lease_grant",
            {"id": lease, "ttl": ttl},
            call,
            ret=self.tick(),
            outcome=OK,
            response=resp,
            member=1,
            revision=resp.revision,
        )

    def keepalive(self, lease: int, ttl: int, client: int = 3) -> Operation:
        call = self.tick()
        resp = LeaseKeepAliveResponse(self.kv.current_revision, lease, ttl)
        return self._op(
            client,
            "lease_keepalive",
            {"id": lease},
            call,
            ret=self.tick(),
            outcome=OK,
            response=resp,
            member=1,
            revision=resp.revision,
        )

    def expire(self, lease: int, at: float) -> None:
        """The leader's revoke of an expired lease (origin seq 0), applied at `at`."""
        self.t = max(self.t, at)
        self.apply("lease_revoke", [lease], origin=1, seq=0, at=at)

    def revoke(self, lease: int, client: int = 3) -> Operation:
        call = self.tick()
        rev = self.apply("lease_revoke", [lease], seq=7)
        return self._op(
            client,
            "lease_revoke",
            {"id": lease},
            call,
            ret=self.tick(),
            outcome=OK,
            response=None,
            member=1,
            revision=rev,
        )

    # ------------------------------------------------------------------ watches, end of run
    def watch(
        self, key: bytes, range_end: bytes = b"", start: int = 1, prev_kv: bool = False, full_history_of: int = 0
    ) -> WatchRecord:
        """A watch that saw every event of [start, now], one response per revision."""
        w = WatchRecord(len(self.history.watches) + 1, key, range_end, start, prev_kv, self.t, [], "", full_history_of)
        w.responses.append(WatchResponseSeen(self.t, 1, self.kv.current_revision, created=True))
        first = start if start > 0 else self.kv.current_revision + 1
        evs = self.kv.events_between(first, self.kv.current_revision + 1, key, range_end)
        by_rev: dict[int, list[Any]] = {}
        for ev in evs:
            by_rev.setdefault(ev.kv.mod_revision, []).append(ev)
        for rev, group in by_rev.items():
            if not prev_kv:
                group = [type(ev)(ev.type, ev.kv, None) for ev in group]
            w.responses.append(WatchResponseSeen(self.tick(0.001), 1, rev, group))
        self.history.watches.append(w)
        return w

    def finish(self) -> History:
        h = self.kv.hash_kv()
        self.history.final_hashes = {m: (h[0], self.kv.current_revision, 0) for m in self.members}
        return self.history
