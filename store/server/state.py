"""The replicated state machine of a member: key-value store, leases, membership.

Every member applies the same committed entries in the same order and so reaches the same
state; `snapshot()` captures all of it at the applied index, and `restore()` rebuilds it.
The watch hub hangs off the key-value store but is local: it is kept across a snapshot
install (its watchers then catch up from the new store's history).

An entry's payload is msgpack [origin_member, seq, kind, args]; the member that proposed
it (origin) answers its client with the result.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

import msgpack

from store import failpoints
from store.api import errors as E
from store.api.kv import (
    CompactionRequest,
    CompactionResponse,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    TxnRequest,
)
from store.api.lease import LeaseGrantResponse, LeaseTimeToLiveResponse
from store.lease.lessor import Lessor
from store.mvcc.kvstore import KVStore
from store.mvcc.validate import check_delete, check_put, check_range_request, check_txn
from store.raft.types import ConfChange, ConfChangeType
from store.server.protocol import MemberInfo
from store.watch.hub import WatchHub

STATE_VERSION = 1
WATCH_BUFFER_EVENTS = 10_000
"""Events a watcher may have queued before it falls back to catching up from history."""
WATCH_SYNC_REVISIONS = 5_000
"""Revisions of history replayed per catch-up step."""


def new_hub(kv: KVStore) -> WatchHub:
    return WatchHub(kv, buffer_events=WATCH_BUFFER_EVENTS, sync_revisions=WATCH_SYNC_REVISIONS)


BACKUP_MAGIC = b"RKBACKUP1"


class ReplicatedState:
    def __init__(
        self, cluster_id: int, member_id: int, members: dict[int, MemberInfo], kv: KVStore, hub: WatchHub
    ) -> None:
        self.cluster_id = cluster_id
        self.member_id = member_id
        self.members = members
        self.removed: set[int] = set()
        """IDs of removed members: never given out again (as etcd), so that a removed member
        still running somewhere can never pass for the member that took its place."""
        self.kv = kv
        self.lessor: Lessor = kv.lessor
        self.hub = hub
        self.applied_index = 0

    # ------------------------------------------------------------------ construction
    @classmethod
    def new(cls, cluster_id: int, member_id: int, members: list[MemberInfo], min_lease_ttl: int = 2) -> ReplicatedState:
        kv = KVStore(Lessor(min_lease_ttl))
        return cls(cluster_id, member_id, {m.id: m for m in members}, kv, new_hub(kv))

    def snapshot(self) -> bytes:
        data: bytes = msgpack.packb(
            [
                STATE_VERSION,
                self.cluster_id,
                [m.to_wire() for m in self.members.values()],
                self.kv.snapshot(),
                sorted(self.removed),
            ],
            use_bin_type=True,
        )
        return data

    @classmethod
    def restore(
        cls, data: bytes, member_id: int, hub: WatchHub | None = None, min_lease_ttl: int = 2
    ) -> ReplicatedState:
        try:
            parts = msgpack.unpackb(data, raw=False)
            version, cluster_id, members, kv_data = parts[:4]
            removed = parts[4] if len(parts) > 4 else []  # snapshots from before removed IDs were kept
        except Exception as e:
            raise E.DiskError(f"state snapshot is not readable: {type(e).__name__}: {e}") from e
        if version != STATE_VERSION:
            raise E.DiskError(f"state snapshot version {version} is not supported (expected {STATE_VERSION})")
        kv = KVStore.restore(kv_data, lessor=Lessor(min_lease_ttl), now=time.monotonic())
        infos = {m[0]: MemberInfo.from_wire(m) for m in members}
        if hub is None:
            hub = new_hub(kv)
        else:
            hub.restore(kv)
        state = cls(cluster_id, member_id, infos, kv, hub)
        state.removed = {int(i) for i in removed}
        return state

    def next_member_id(self) -> int:
        """The ID for a member being added: above every current and every removed one."""
        return max([*self.members, *self.removed], default=0) + 1

    # ------------------------------------------------------------------ backups
    def backup(self) -> bytes:
        """A self-checking copy of the state (snapshot bytes + CRC), for `store snapshot save`."""
        body = self.snapshot()
        return BACKUP_MAGIC + zlib.crc32(body).to_bytes(4, "big") + body

    @staticmethod
    def _backup_body(data: bytes) -> bytes:
        if not data.startswith(BACKUP_MAGIC) or len(data) < len(BACKUP_MAGIC) + 4:
            raise E.InvalidArgumentError("not a raftkube backup (bad magic)")
        crc = int.from_bytes(data[len(BACKUP_MAGIC) : len(BACKUP_MAGIC) + 4], "big")
        body = data[len(BACKUP_MAGIC) + 4 :]
        if zlib.crc32(body) != crc:
            raise E.InvalidArgumentError("backup checksum mismatch: the file is damaged")
        return body

    @classmethod
    def check_backup(cls, data: bytes) -> int:
        """The revision a backup holds; raises a typed error for a damaged file."""
        return cls.restore(cls._backup_body(data), 0).kv.current_revision

    @classmethod
    def from_backup(
        cls, data: bytes, cluster_id: int, member_id: int, members: list[MemberInfo], min_lease_ttl: int = 2
    ) -> ReplicatedState:
        """The backed-up keys, history and leases, in a new cluster with new members."""
        old = cls.restore(cls._backup_body(data), member_id, min_lease_ttl=min_lease_ttl)
        old.cluster_id = cluster_id
        old.members = {m.id: m for m in members}
        old.removed = set()  # a new cluster: the backup's member history does not apply
        return old

    # ------------------------------------------------------------------ validation (before proposing)
    def validate_range(self, req: RangeRequest) -> None:
        check_range_request(req)

    def validate_put(self, req: PutRequest) -> None:
        check_put(req)
        if req.lease and not self.lessor.exists(req.lease):
            raise E.LeaseNotFoundError(req.lease)

    def validate_delete(self, req: DeleteRangeRequest) -> None:
        check_delete(req)

    def validate_txn(self, req: TxnRequest) -> None:
        check_txn(req, self.kv.max_txn_ops)

    def validate_compact(self, req: CompactionRequest) -> None:
        if req.revision > self.kv.current_revision:
            raise E.FutureRevisionError(self.kv.current_revision)
        if req.revision <= self.kv.compact_revision:
            raise E.CompactedError(self.kv.compact_revision)

    def validate_lease_grant(self, lease_id: int, ttl: int) -> None:
        if ttl <= 0:
            raise E.InvalidArgumentError(f"lease TTL must be positive, got {ttl}")
        if self.lessor.exists(lease_id):
            raise E.LeaseExistsError("etcdserver: lease already exists")

    # ------------------------------------------------------------------ apply
    def apply(self, data: bytes, index: int) -> tuple[int, int, Any]:
        """Apply one committed entry; returns (origin, seq, wire result or StoreError)."""
        self.applied_index = index
        origin, seq, kind, args = msgpack.unpackb(data, raw=False)
        try:
            return origin, seq, self._apply(kind, args)
        except E.StoreError as e:
            # Refused at apply time (e.g. a lease revoked between validation and commit):
            # every member refuses it the same way, and nothing changed.
            return origin, seq, e

    def _apply(self, kind: str, args: Any) -> Any:
        kv = self.kv
        if kind == "put":
            resp, events = kv.put(PutRequest.from_wire(args))
            self.hub.notify(resp.revision, events)
            return resp.to_wire()
        if kind == "delete_range":
            dresp, events = kv.delete_range(DeleteRangeRequest.from_wire(args))
            if events:
                self.hub.notify(dresp.revision, events)
            return dresp.to_wire()
        if kind == "txn":
            tresp, events = kv.txn(TxnRequest.from_wire(args))
            if events:
                self.hub.notify(tresp.revision, events)
            return tresp.to_wire()
        if kind == "compact":
            req = CompactionRequest.from_wire(args)
            if failpoints.ENABLED:
                failpoints.hit("compact-before")
            kv.compact(req.revision)
            if failpoints.ENABLED:
                failpoints.hit("compact-after")
            return CompactionResponse(kv.current_revision).to_wire()
        if kind == "lease_grant":
            lease_id, ttl = int(args[0]), int(args[1])
            lease = self.lessor.grant(lease_id, ttl, time.monotonic())
            return LeaseGrantResponse(kv.current_revision, lease.id, lease.ttl).to_wire()
        if kind == "lease_revoke":
            lease_id = int(args[0])
            if not self.lessor.exists(lease_id):
                raise E.LeaseNotFoundError(lease_id)
            rev, events = kv.revoke_lease_keys(lease_id)  # also removes it from the lessor
            if events:
                self.hub.notify(rev, events)
            return [kv.current_revision]
        raise E.InvalidArgumentError(f"unknown entry kind {kind!r}")

    def apply_member_change(self, cc: ConfChange) -> tuple[int, int]:
        """Update the member table; returns (origin, seq) of the proposal, for its answer.

        The change's context is msgpack [origin, seq, member info or None]."""
        origin, seq, info_wire = msgpack.unpackb(cc.context, raw=False) if cc.context else (0, 0, None)
        if cc.type == ConfChangeType.REMOVE_NODE:
            self.members.pop(cc.node_id, None)
            self.removed.add(cc.node_id)
        elif info_wire is not None:
            info = MemberInfo.from_wire(info_wire)
            learner = cc.type == ConfChangeType.ADD_LEARNER
            self.members[cc.node_id] = MemberInfo(
                info.id, info.name, info.peer_url, info.client_url, info.http_url, learner
            )
        elif cc.node_id in self.members:
            # Promotion: same member, now a voter.
            m = self.members[cc.node_id]
            self.members[cc.node_id] = MemberInfo(m.id, m.name, m.peer_url, m.client_url, m.http_url, False)
        return int(origin), int(seq)

    # ------------------------------------------------------------------ leases (local views)
    def lease_time_to_live(self, lease_id: int, keys: bool, now: float) -> LeaseTimeToLiveResponse:
        return self.lessor.time_to_live(lease_id, now, keys=keys, revision=self.kv.current_revision)
