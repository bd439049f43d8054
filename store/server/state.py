"""The replicated state machine of a member: key-value store, leases, membership.

Every member applies the same committed entries in the same order and so reaches the same
state; `snapshot()` captures all of it at the applied index, and `restore()` rebuilds it.
The watch hub hangs off the key-value store but is local: it is kept across a snapshot
install (its watchers then catch up from the new store's history).

An entry's payload is msgpack [origin_member, seq, kind, args]; the member that proposed
it (origin) answers its client with the result.  `args` is the request's own wire form
(for lease_grant: [lease_id, ttl], the id chosen by the leader).

Applying an entry never raises: an entry that cannot be decoded or applied (it got into the
log somehow: a member of another version, a bug, a forged peer) gives the same typed error
on every member, which answers its client with it, and the member goes on.
"""

from __future__ import annotations

import logging
import zlib
from typing import Any

import msgpack

from store import failpoints
from store.api import errors as E
from store.api.cluster import MemberInfo
from store.api.kv import (
    CompactionRequest,
    CompactionResponse,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    TxnRequest,
)
from store.api.lease import LeaseGrantResponse, LeaseIdRequest, LeaseRevokeResponse, LeaseTimeToLiveResponse
from store.api.wire import INT64_MIN, Fields, check_int
from store.lease.lessor import Lessor
from store.mvcc.kvstore import KVStore
from store.mvcc.validate import check_delete, check_put, check_range_request, check_txn
from store.raft.types import ConfChange, ConfChangeType
from store.watch.hub import WatchHub

log = logging.getLogger("raftkube.state")

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
        cls, data: bytes, member_id: int, hub: WatchHub | None = None, min_lease_ttl: int = 2, now: float = 0.0
    ) -> ReplicatedState:
        """The state a snapshot holds; DiskError says why bytes are not a usable snapshot."""
        cluster_id, infos, removed, kv = cls._decode(data, min_lease_ttl, now)
        if hub is None:
            hub = new_hub(kv)
        else:
            hub.restore(kv)
        state = cls(cluster_id, member_id, infos, kv, hub)
        state.removed = removed
        return state

    @staticmethod
    def _decode(data: bytes, min_lease_ttl: int, now: float) -> tuple[int, dict[int, MemberInfo], set[int], KVStore]:
        try:
            parts = msgpack.unpackb(data, raw=False)
            f = Fields(parts, "snapshot", 4, 5)  # snapshots from before removed IDs were kept have 4
            version = f.integer("version")
            if version != STATE_VERSION:
                raise E.DiskError(f"state snapshot version {version} is not supported (expected {STATE_VERSION})")
            cluster_id = f.integer("cluster_id")
            members, mpath = f.array("members")
            infos = {}
            for i, m in enumerate(members):
                info = MemberInfo.from_wire(m, f"{mpath}[{i}]")
                infos[info.id] = info
            kv_data = f.blob("kv", max_len=1 << 62)
            removed: set[int] = set()
            if f.more():
                ids, rpath = f.array("removed")
                removed = {check_int(v, f"{rpath}[{i}]", lo=1) for i, v in enumerate(ids)}
            kv = KVStore.restore(kv_data, lessor=Lessor(min_lease_ttl), now=now)
        except E.DiskError:
            raise
        except Exception as e:  # whatever the bytes are, they are not a snapshot we can use
            raise E.DiskError(f"state snapshot is not readable: {type(e).__name__}: {e}") from e
        return cluster_id, infos, removed, kv

    @classmethod
    def check_snapshot(cls, data: bytes) -> None:
        """Raise DiskError unless `data` restores: a snapshot received from a peer is checked
        before it is made durable, so that bad bytes can never become the member's state."""
        cls._decode(data, 1, 0.0)

    def install(self, data: bytes, now: float) -> None:
        """Replace the whole state with a snapshot's (sent by the leader), in place: whoever
        holds this object sees the new state.  The watch hub is kept; its watchers catch up
        from the new history."""
        cluster_id, infos, removed, kv = self._decode(data, self.lessor.min_ttl, now)
        self.cluster_id = cluster_id
        self.members = infos
        self.removed = removed
        self.kv = kv
        self.lessor = kv.lessor
        self.hub.restore(kv)

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

    def validate_put(self, req: PutRequest, check_lease: bool = True) -> None:
        """`check_lease` False: the lease is looked for only when the entry is applied (a
        member that takes writes for the leader may not have applied a grant made elsewhere
        yet; etcd too checks at apply)."""
        check_put(req)
        if check_lease and req.lease and not self.lessor.exists(req.lease):
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
        self.lessor.check_grant(lease_id, ttl)

    # ------------------------------------------------------------------ apply
    def apply(self, data: bytes, index: int, now: float) -> tuple[int, int, Any]:
        """Apply one committed entry; returns (origin, seq, wire result or StoreError).

        Never raises: a refused or undecodable entry changes nothing and yields the same
        error on every member (origin 0 when not even the envelope decodes: nobody to answer)."""
        self.applied_index = index
        try:
            envelope = msgpack.unpackb(data, raw=False)
            f = Fields(envelope, "entry", 4)
            origin, seq, kind = f.integer("origin"), f.integer("seq"), f.text("kind", 32)
            args, _ = f.any("args")
        except Exception as e:  # garbage in the log: nothing to apply, nobody to answer
            log.error("entry %d cannot be decoded and is skipped: %s: %s", index, type(e).__name__, e)
            return 0, 0, E.InvalidArgumentError(f"entry {index} cannot be decoded")
        try:
            return origin, seq, self._apply(kind, args, now)
        except E.StoreError as e:
            # Refused at apply time (a malformed request, a lease revoked between validation
            # and commit): every member refuses it the same way, and nothing changed.
            return origin, seq, e
        except MemoryError:
            raise  # not deterministic: the member cannot go on safely
        except Exception as e:
            # A bug, met the same way by every member applying the same entry: report it to
            # the client and in the log, and keep serving (etcd would stop here for good).
            log.exception("applying entry %d (%s) failed", index, kind)
            return origin, seq, E.StoreError(f"internal error applying {kind}: {type(e).__name__}: {e}")

    def _apply(self, kind: str, args: Any, now: float) -> Any:
        kv = self.kv
        if kind == "put":
            resp, events = kv.put(PutRequest.from_wire(args))
            self._notify(resp.revision, events)
            return resp.to_wire()
        if kind == "delete_range":
            dresp, events = kv.delete_range(DeleteRangeRequest.from_wire(args))
            self._notify(dresp.revision, events)
            return dresp.to_wire()
        if kind == "txn":
            tresp, events = kv.txn(TxnRequest.from_wire(args))
            self._notify(tresp.revision, events)
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
            f = Fields(args, "lease_grant", 2)
            lease_id, ttl = f.integer("id", lo=INT64_MIN), f.integer("ttl", lo=INT64_MIN)
            self.validate_lease_grant(lease_id, ttl)
            lease = self.lessor.grant(lease_id, ttl, now)
            return LeaseGrantResponse(kv.current_revision, lease.id, lease.ttl).to_wire()
        if kind == "lease_revoke":
            lease_id = LeaseIdRequest.from_wire(args, "lease_revoke").id
            if not self.lessor.exists(lease_id):
                raise E.LeaseNotFoundError(lease_id)
            rev, events = kv.revoke_lease_keys(lease_id)  # also removes it from the lessor
            self._notify(rev, events)
            return LeaseRevokeResponse(kv.current_revision).to_wire()
        raise E.InvalidArgumentError(f"entry.kind: unknown entry kind {kind!r}", field="entry.kind")

    def _notify(self, revision: int, events: list[Any]) -> None:
        """Hand a revision's events to the watch hub.  The hub is local to this member, so a
        failure there must not turn an applied write into an error answer."""
        if not events:
            return
        try:
            self.hub.notify(revision, events)
        except Exception:
            log.exception("watch hub failed on revision %d; its watchers catch up from history", revision)

    @staticmethod
    def decode_member_change(cc: ConfChange) -> tuple[int, int, MemberInfo | None]:
        """(origin, seq, member info or None) from a change's context, msgpack
        [origin, seq, info or nil]; InvalidArgumentError if it is not that."""
        if not cc.context:
            return 0, 0, None
        try:
            w = msgpack.unpackb(cc.context, raw=False)
        except Exception as e:
            raise E.InvalidArgumentError(f"conf change context does not decode: {type(e).__name__}") from None
        f = Fields(w, "conf_change", 3)
        origin, seq = f.integer("origin"), f.integer("seq")
        raw, path = f.any("member")
        info = None if raw is None else MemberInfo.from_wire(raw, path)
        if info is not None and info.id != cc.node_id:
            raise Fields.fail(f"{path}.id", f"names member {info.id}, the change is for {cc.node_id}")
        return origin, seq, info

    def apply_member_change(self, cc: ConfChange, info: MemberInfo | None) -> None:
        """Update the member table (the change was decoded by `decode_member_change`)."""
        if cc.type == ConfChangeType.REMOVE_NODE:
            self.members.pop(cc.node_id, None)
            self.removed.add(cc.node_id)
        elif info is not None:
            learner = cc.type == ConfChangeType.ADD_LEARNER
            self.members[cc.node_id] = MemberInfo(
                info.id, info.name, info.peer_url, info.client_url, info.http_url, learner
            )
        elif cc.node_id in self.members:
            # Promotion: same member, now a voter.
            m = self.members[cc.node_id]
            self.members[cc.node_id] = MemberInfo(m.id, m.name, m.peer_url, m.client_url, m.http_url, False)

    # ------------------------------------------------------------------ leases (local views)
    def lease_time_to_live(self, lease_id: int, keys: bool, now: float) -> LeaseTimeToLiveResponse:
        return self.lessor.time_to_live(lease_id, now, keys=keys, revision=self.kv.current_revision)
