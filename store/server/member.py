"""A store member: one OS process holding one Raft node, its disk, and its client endpoints.

Request paths:

* writes (put, delete, txn, compact, lease grant/revoke, membership) are proposed by the
  leader only; a follower answers NotLeaderError naming the leader, and the client goes
  there.  Proposals arriving together are proposed together (one append, one broadcast).
  The leader answers once the entry is applied; a proposal that does not commit within the
  request timeout gets TimeoutError_ (its outcome is unknown), and one overtaken by a
  leader change gets LeaderChangedError.
* linearizable reads wait for a ReadIndex round (batched: every read that arrives while one
  round is being set up shares it) and for the state machine to reach that index; any
  member serves them.  Serializable reads are answered from local state at once.
* watches are served by any member from its own state machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from store import canaries, failpoints
from store.api import errors as E
from store.api.kv import (
    CompactionRequest,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    TxnRequest,
)
from store.api.watch import WatchCreateRequest, WatchResponse
from store.lease.lessor import min_lease_ttl as lease_ttl_floor
from store.raft import ConfChange, ConfChangeType, Config, RawNode, Ready
from store.raft.errors import ProposalDroppedError
from store.raft.types import NONE, EntryType, StateType
from store.server.apply_log import SNAPSHOT_INSTALLED, SNAPSHOT_LOADED, ApplyLog
from store.server.config import MemberConfig
from store.server.framing import FrameReader, encode_frame
from store.server.http import HttpEndpoint, render_metrics
from store.server.node import RaftNode
from store.server.persistence import Persistence
from store.server.protocol import END, ERROR, OK, PROTOCOL, STREAM, Header, MemberInfo, split_url
from store.server.state import ReplicatedState
from store.server.transport import PeerTransport
from store.server.unsafe_watch import drop_after_compaction, strip_delete_prev_kv
from store.server.watch_frames import WatchFrameEncoder

log = logging.getLogger("raftkube.member")

FAST_WRITES = frozenset({"put", "delete_range", "txn"})
"""Methods served without a coroutine per request (see `_fast_write`)."""
FREEZE_EVERY = 20_000
"""Applied entries between two gc.freeze() calls."""
WATCH_BACKLOG_PAUSE = 4 << 20
"""Unsent bytes on a watch connection above which historic catch-up waits for the reader."""
WATCH_BACKLOG_LIMIT = 64 << 20
"""Unsent bytes at which a watch connection is cut off (its client resumes elsewhere)."""


@dataclass(slots=True)
class _Pending:
    """A proposal waiting to be applied: `done` gets the wire result or a StoreError."""

    deadline: float
    done: Callable[[Any], None]


@dataclass
class _ReadBatch:
    ctx: bytes
    fut: asyncio.Future[None]
    index: int = 0


@dataclass(eq=False)
class _ClientConn:
    writer: asyncio.StreamWriter
    watches: dict[int, int] = field(default_factory=dict)
    """watch_id -> request id of the watch stream on this connection."""


def _settles(fut: asyncio.Future[Any]) -> Callable[[Any], None]:
    """The `done` callback of a waiter that an awaiting handler holds as a future: a
    StoreError result fails it; a second answer (expired, then applied) is ignored."""

    def done(result: Any) -> None:
        if not fut.done():
            if isinstance(result, E.StoreError):
                fut.set_exception(result)
            else:
                fut.set_result(result)

    return done


class Member:
    def __init__(self, cfg: MemberConfig) -> None:
        self.cfg = cfg
        self.id = cfg.member_id
        self.persistence: Persistence | None = None
        self.state: ReplicatedState | None = None
        self.node: RaftNode | None = None
        self.transport: PeerTransport | None = None
        self.http: HttpEndpoint | None = None
        self.client_server: asyncio.Server | None = None
        self._seq = 0
        self._waiters: dict[int, _Pending] = {}
        """By seq, hence by deadline (every request gets the same timeout)."""
        self._props: list[bytes] = []
        self._read_batch: _ReadBatch | None = None
        self._reads_inflight: dict[bytes, _ReadBatch] = {}
        self._reads_waiting: list[_ReadBatch] = []
        self._conns: set[_ClientConn] = set()
        self._watch_owner: dict[int, _ClientConn] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._dispatch_scheduled = False
        self._last_snapshot_index = 0
        self._frozen_at = 0
        self._compact_seen = 0
        """drop-watch-event-at-compaction: the compact revision the canary last acted on."""
        self._drop_armed: dict[int, None] = {}
        """drop-watch-event-at-compaction: watch ids whose next event is to be dropped."""
        self._rng = random.Random()
        self.apply_log = ApplyLog.from_env(cfg.data_dir)
        """Test-only evidence for the chaos checker (see store/server/apply_log.py)."""
        self._started = time.monotonic()
        # Metrics.
        self.leader_changes = 0
        self.proposals_committed = 0
        self.proposals_failed = 0
        self.slow_watch_conns = 0
        self.snapshots_installed = 0

    # ================================================================== lifecycle
    async def start(self) -> None:
        cfg = self.cfg
        loop = asyncio.get_running_loop()
        failpoints.check_env()
        canaries.check_env()
        if canaries.ACTIVE:
            log.warning(
                "UNSAFE MODES ON (%s=%s): this member breaks its guarantees on purpose; for chaos tests only",
                canaries.ENV,
                ",".join(canaries.ACTIVE),
            )
        self.persistence = Persistence.open(cfg.data_dir, cfg.member_id, cfg.cluster_id, fsync=cfg.fsync)
        p = self.persistence
        snap = p.snapshot
        backup = cfg.data_dir / "restore_from.bin"
        ttl = self.min_lease_ttl
        if snap is not None and snap.data:
            self.state = ReplicatedState.restore(snap.data, self.id, min_lease_ttl=ttl)
            if self.apply_log is not None:
                meta = snap.metadata
                rev = self.state.kv.current_revision
                self.apply_log.record(meta.index, meta.term, SNAPSHOT_LOADED, b"", rev, time.monotonic())
        elif p.is_new and not cfg.join and backup.exists():
            # `store snapshot restore`: a new cluster that starts from a backup's state.
            self.state = ReplicatedState.from_backup(
                backup.read_bytes(), cfg.cluster_id, self.id, cfg.initial_cluster, min_lease_ttl=ttl
            )
        else:
            members = cfg.initial_cluster if not cfg.join else []
            self.state = ReplicatedState.new(cfg.cluster_id, self.id, members, min_lease_ttl=ttl)
        applied = snap.metadata.index if snap is not None else 0
        self._last_snapshot_index = applied
        self.state.applied_index = applied
        self._compact_seen = self.state.kv.compact_revision
        raw = RawNode(
            Config(
                id=self.id,
                storage=p.storage,
                rng=random.Random(),
                election_tick=cfg.election_ticks,
                heartbeat_tick=cfg.heartbeat_ticks,
                applied=applied,
                max_size_per_msg=cfg.max_size_per_msg,
                max_inflight_msgs=cfg.max_inflight_msgs,
                check_quorum=cfg.check_quorum,
                pre_vote=cfg.pre_vote,
            )
        )
        if p.is_new and not cfg.join:
            # Every member bootstraps from the same initial state: same members, same data.
            raw.bootstrap([m.id for m in cfg.initial_cluster], self.state.snapshot())
        self.transport = PeerTransport(self.id, self._on_peer_messages, self._on_unreachable, self._on_snapshot_status)
        self.node = RaftNode(
            raw,
            p.storage,
            persist=p.persist_ready,
            save_snapshot_file=p.save_snapshot_file,
            send=self.transport.send,
            apply=self._apply_ready,
            tick_seconds=cfg.tick_ms / 1000,
            on_tick=self._on_tick,
        )
        host, port = split_url(cfg.peer_url)
        await self.transport.listen(host, port)
        for m in self._known_members():
            if m.id != self.id:
                h, pt = split_url(cfg.dial_url(m))
                self.transport.add_peer(m.id, h, pt)
        host, port = split_url(cfg.client_url)
        self.client_server = await asyncio.start_server(self._serve_client, host, port, reuse_address=True)
        self.http = HttpEndpoint(self._health, self._metrics)
        host, port = split_url(cfg.http_url)
        await self.http.listen(host, port)
        self.node.start()
        self._tasks.append(loop.create_task(self._watch_sync_loop(), name="watch-sync"))
        self._freeze_heap()
        log.info("member %d (%s) serving clients on %s, peers on %s", self.id, cfg.name, cfg.client_url, cfg.peer_url)

    @property
    def min_lease_ttl(self) -> int:
        """etcd's rule: a lease must outlive an election (1.5 election timeouts)."""
        return lease_ttl_floor(self.cfg.election_ticks, self.cfg.tick_ms)

    def _known_members(self) -> list[MemberInfo]:
        assert self.state is not None
        if self.state.members:
            return list(self.state.members.values())
        return list(self.cfg.initial_cluster)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self.client_server is not None:
            self.client_server.close()
        for c in list(self._conns):
            c.writer.close()
        if self.http is not None:
            await self.http.close()
        if self.node is not None:
            await self.node.stop()
        if self.transport is not None:
            await self.transport.close()
        if self.persistence is not None:
            self.persistence.close()

    async def wait_stopped(self) -> None:
        assert self.node is not None
        await self.node.stopped.wait()

    # ================================================================== raft plumbing
    @property
    def raw(self) -> RawNode:
        assert self.node is not None
        return self.node.raw

    def _on_peer_messages(self, msgs: list[Any]) -> None:
        assert self.node is not None
        self.node.step(msgs)

    def _on_unreachable(self, peer: int) -> None:
        with contextlib.suppress(Exception):
            self.raw.report_unreachable(peer)

    def _on_snapshot_status(self, peer: int, failed: bool) -> None:
        with contextlib.suppress(Exception):
            self.raw.report_snapshot(peer, failed)
        if self.node is not None:
            self.node.wake()

    def header(self) -> Header:
        assert self.state is not None
        return Header(self.state.cluster_id, self.id, self.state.kv.current_revision, self.raw.raft.term)

    def _leader_error(self) -> E.StoreError:
        lead = self.raw.raft.lead
        assert self.state is not None
        if lead == NONE:
            return E.NoLeaderError("no leader: an election is under way or this member is cut off")
        info = self.state.members.get(lead)
        return E.NotLeaderError(
            f"member {self.id} is not the leader; the leader is {lead}",
            leader_id=lead,
            leader_client_url=info.client_url if info else "",
        )

    def _on_tick(self) -> None:
        """Duties on the clock: time out waiting writes; as leader, expire leases (by
        proposing their revocation)."""
        assert self.state is not None and self.node is not None
        if self._waiters:
            self._expire_waiters(time.monotonic())
        if not self.node.is_leader:
            return
        # The lessor reports each expired lease once, and again after a while if its
        # revocation was lost (e.g. with a leader change).
        for lease_id in self.state.lessor.expired(time.monotonic()):
            self._enqueue_proposal("lease_revoke", [lease_id], origin_seq=0)

    # ================================================================== apply
    def _apply_ready(self, rd: Ready) -> None:
        state = self.state
        assert state is not None
        if rd.snapshot is not None and rd.snapshot.data:
            # A snapshot from the leader replaces our whole state machine.
            self.state = state = ReplicatedState.restore(
                rd.snapshot.data, self.id, hub=state.hub, min_lease_ttl=self.min_lease_ttl
            )
            state.applied_index = rd.snapshot.metadata.index
            self._last_snapshot_index = rd.snapshot.metadata.index
            if rd.snapshot.metadata.index > 1:  # not the bootstrap snapshot
                self.snapshots_installed += 1
                meta = rd.snapshot.metadata
                log.info("installed a snapshot from the leader at index %d, term %d", meta.index, meta.term)
                if failpoints.ENABLED:
                    failpoints.hit("snapshot-after-install")
            self._sync_peers()
        fp = failpoints.ENABLED  # once per Ready: the loop below is the hot path
        wrote = False
        alog = self.apply_log
        if alog is not None and rd.snapshot is not None and rd.snapshot.data:
            meta = rd.snapshot.metadata
            alog.record(meta.index, meta.term, SNAPSHOT_INSTALLED, b"", state.kv.current_revision, time.monotonic())
        for e in rd.committed_entries:
            if e.type == EntryType.CONF_CHANGE:
                self._apply_conf_change(e.data)
                state.applied_index = e.index
                if alog is not None:
                    alog.record(e.index, e.term, int(e.type), e.data, state.kv.current_revision, time.monotonic())
                continue
            if not e.data:
                state.applied_index = e.index
                if alog is not None:
                    alog.record(e.index, e.term, int(e.type), b"", state.kv.current_revision, time.monotonic())
                continue
            if fp:
                failpoints.hit("apply-before")
            origin, seq, result = state.apply(e.data, e.index)
            if fp:
                failpoints.hit("apply-after")
            if alog is not None:
                alog.record(e.index, e.term, int(e.type), e.data, state.kv.current_revision, time.monotonic())
            wrote = True
            if origin == self.id:
                pending = self._waiters.pop(seq, None)
                if pending is not None:
                    pending.done(result)
                self.proposals_committed += 1
        if alog is not None:
            alog.flush()
        if rd.read_states:
            for rs in rd.read_states:
                batch = self._reads_inflight.pop(rs.request_ctx, None)
                if batch is not None:
                    batch.index = rs.index
                    self._reads_waiting.append(batch)
        if self._reads_waiting:
            applied = state.applied_index
            still = []
            for b in self._reads_waiting:
                if b.index <= applied:
                    if not b.fut.done():
                        b.fut.set_result(None)
                else:
                    still.append(b)
            self._reads_waiting = still
        if rd.soft_state is not None:
            # After applying: a write committed in this very Ready still gets its answer
            # before a step-down fails the writes left waiting.
            self._on_soft_state(rd)
        if wrote:
            self._schedule_dispatch()
        if state.applied_index - self._last_snapshot_index >= self.cfg.snapshot_count:
            self._snapshot()
        if state.applied_index - self._frozen_at >= FREEZE_EVERY:
            self._freeze_heap()

    def _freeze_heap(self) -> None:
        """Move every object alive now out of the cyclic garbage collector's sight.

        The state machine holds millions of long-lived objects (every revision of every key);
        a full collection walks all of them (150 ms at 200k revisions) and showed up as the
        p99 write latency.  They are acyclic and live until compaction, so freezing them
        costs nothing; only new objects are scanned from now on."""
        gc.collect(1)
        gc.freeze()
        assert self.state is not None
        self._frozen_at = self.state.applied_index

    def _on_soft_state(self, rd: Ready) -> None:
        assert rd.soft_state is not None and self.state is not None
        self.leader_changes += 1
        if rd.soft_state.raft_state == StateType.LEADER:
            # TTLs restart on a new leader: the old leader's keep-alives may not have reached us.
            self.state.lessor.promote(time.monotonic())
        else:
            self.state.lessor.demote()
            err = E.LeaderChangedError("leader changed before the request was applied; it may or may not be")
            waiters, self._waiters = self._waiters, {}
            for pending in waiters.values():
                pending.done(err)
        # Reads waiting for an index from a former leader must ask again.
        inflight, self._reads_inflight = self._reads_inflight, {}
        for b in inflight.values():
            self._issue_read(b)

    def _apply_conf_change(self, data: bytes) -> None:
        assert self.state is not None
        if failpoints.ENABLED:
            failpoints.hit("conf-change-before-apply")
        cc = ConfChange.decode(data)
        self.raw.apply_conf_change(cc)
        origin, seq = self.state.apply_member_change(cc)
        if origin == self.id:
            pending = self._waiters.pop(seq, None)
            if pending is not None:
                pending.done(None)
        if cc.type == ConfChangeType.REMOVE_NODE and cc.node_id == self.id:
            log.warning("member %d was removed from the cluster; it stops serving", self.id)
        self._sync_peers()

    def _sync_peers(self) -> None:
        assert self.state is not None and self.transport is not None
        for m in self.state.members.values():
            if m.id != self.id:
                h, p = split_url(self.cfg.dial_url(m))
                self.transport.add_peer(m.id, h, p)
        for pid in list(self.transport.peers):
            if pid not in self.state.members:
                self.transport.remove_peer(pid)

    def _snapshot(self) -> None:
        """Snapshot the state machine at the applied index; release the log before it."""
        assert self.state is not None and self.persistence is not None and self.node is not None
        applied = self.state.applied_index
        data = self.state.snapshot()
        conf_state = self.raw.raft.conf_state()
        snap = self.persistence.storage.create_snapshot(applied, conf_state, data)
        self._last_snapshot_index = applied
        compact_to = applied - self.cfg.snapshot_catchup_entries
        p = self.persistence
        if failpoints.ENABLED:
            failpoints.hit("snapshot-before-save")
        fut = asyncio.get_running_loop().run_in_executor(self.node.disk_thread, p.save_snapshot_file, snap)

        def record() -> None:
            # Between two Readies (the WAL has one writer), and only once the snapshot file
            # is durable, may the WAL point at it and the log (and WAL) before it go.
            if failpoints.ENABLED:
                failpoints.hit("snapshot-after-save")
            p.record_snapshot(snap)
            if compact_to > p.storage.first_index():
                p.storage.compact(compact_to)
                p.release_wal_before(compact_to)

        def saved(f: asyncio.Future[None]) -> None:
            if f.cancelled() or f.exception() is not None:
                log.error("saving the snapshot at %d failed: %s", applied, f.exception())
                return
            node.defer(record)

        node = self.node
        fut.add_done_callback(saved)

    # ================================================================== proposals
    def _enqueue_proposal(self, kind: str, args: Any, origin_seq: int) -> None:
        data = msgpack.packb([self.id, origin_seq, kind, args], use_bin_type=True)
        first = not self._props
        self._props.append(data)
        if first:
            asyncio.get_running_loop().call_soon(self._flush_proposals)

    def _flush_proposals(self) -> None:
        batch, self._props = self._props, []
        if not batch:
            return
        assert self.node is not None
        try:
            self.node.propose(batch)
        except ProposalDroppedError as e:
            err = E.UnavailableError(f"proposal dropped: {e}")
            for data in batch:
                seq = msgpack.unpackb(data)[1]
                pending = self._waiters.pop(seq, None)
                if pending is not None:
                    pending.done(err)
            self.proposals_failed += len(batch)

    def submit(self, kind: str, args: Any, done: Callable[[Any], None]) -> None:
        """Propose a write; `done` later gets its wire result or a StoreError (not leader,
        dropped, leader changed, timed out).  No task, future or timer per request: the
        tick expires overdue waiters, in seq order, which is deadline order."""
        assert self.node is not None
        if not self.node.is_leader:
            done(self._leader_error())
            return
        if self.node.no_space:
            done(E.NoSpaceError("no space left on the member's disk: writes are refused until space returns"))
            return
        self._seq += 1
        self._waiters[self._seq] = _Pending(time.monotonic() + self.cfg.request_timeout, done)
        self._enqueue_proposal(kind, args, self._seq)

    async def propose(self, kind: str, args: Any) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done = _settles(fut)

        self.submit(kind, args, done)
        return await fut

    def _expire_waiters(self, now: float) -> None:
        waiters = self._waiters
        while waiters:
            seq, pending = next(iter(waiters.items()))
            if pending.deadline > now:
                return
            del waiters[seq]
            self.proposals_failed += 1
            pending.done(
                E.TimeoutError_(
                    f"not committed within {self.cfg.request_timeout:.1f}s (leader cut off from its quorum?); "
                    "the request may or may not be applied"
                )
            )

    # ================================================================== reads
    async def read_barrier(self) -> None:
        """Wait until local state reflects every write committed before this call (ReadIndex)."""
        if canaries.READ_WITHOUT_READINDEX:
            return  # unsafe on purpose: local state, however stale, as if it were confirmed
        batch = self._read_batch
        if batch is None:
            self._seq += 1
            batch = _ReadBatch(b"r%d" % self._seq, asyncio.get_running_loop().create_future())
            self._read_batch = batch
            asyncio.get_running_loop().call_soon(self._start_read_batch)
        try:
            await asyncio.wait_for(asyncio.shield(batch.fut), self.cfg.request_timeout)
        except TimeoutError:
            raise E.TimeoutError_(
                f"linearizable read not confirmed within {self.cfg.request_timeout:.1f}s (no quorum reachable?)"
            ) from None

    def _start_read_batch(self) -> None:
        batch, self._read_batch = self._read_batch, None
        if batch is not None:
            self._issue_read(batch)

    def _issue_read(self, batch: _ReadBatch) -> None:
        assert self.node is not None
        try:
            self.node.read_index(batch.ctx)
        except ProposalDroppedError:
            if not batch.fut.done():
                batch.fut.set_exception(self._leader_error())
            return
        self._reads_inflight[batch.ctx] = batch

    # ================================================================== watch dispatch
    def _schedule_dispatch(self) -> None:
        if not self._dispatch_scheduled:
            self._dispatch_scheduled = True
            asyncio.get_running_loop().call_soon(self._dispatch_watch)

    def _dispatch_watch(self) -> None:
        self._dispatch_scheduled = False
        assert self.state is not None
        responses = self.state.hub.drain(max_events=50_000)
        if canaries.DROP_WATCH_EVENT_AT_COMPACTION:
            self._drop_event_after_compaction(responses)
        if not responses:
            return
        if canaries.SKIP_PREV_KV:
            responses = [strip_delete_prev_kv(r) for r in responses]
        if self.state.hub.pending():
            # Bounded work per loop turn: the rest goes out on the next one.
            self._schedule_dispatch()
        enc = WatchFrameEncoder(self.header().to_wire())
        per_conn: dict[_ClientConn, list[bytes]] = {}
        for resp in responses:
            conn = self._watch_owner.get(resp.watch_id)
            if conn is None:
                continue
            rid = conn.watches.get(resp.watch_id)
            if rid is None:
                continue
            per_conn.setdefault(conn, []).append(enc.frame(rid, END if resp.canceled else STREAM, resp))
            if resp.canceled:
                conn.watches.pop(resp.watch_id, None)
                self._watch_owner.pop(resp.watch_id, None)
        for conn, frames in per_conn.items():
            if failpoints.ENABLED:
                failpoints.hit("watch-before-send")
            conn.writer.write(b"".join(frames))
            if self._write_backlog(conn) > WATCH_BACKLOG_LIMIT:
                # A client that does not read its watch stream must not grow our memory
                # without bound: cut it off; its client resumes from its last revision.
                self.slow_watch_conns += 1
                log.warning("closing a client connection whose watch stream is not being read")
                conn.writer.close()

    def _drop_event_after_compaction(self, responses: list[WatchResponse]) -> None:
        """drop-watch-event-at-compaction: once a new compaction shows, every watcher that
        exists then loses the next event it would be sent."""
        assert self.state is not None
        compact = self.state.kv.compact_revision
        if compact != self._compact_seen:
            self._compact_seen = compact
            self._drop_armed.update(dict.fromkeys(self._watch_owner))
        drop_after_compaction(responses, self._drop_armed)

    @staticmethod
    def _write_backlog(conn: _ClientConn) -> int:
        transport = conn.writer.transport
        return transport.get_write_buffer_size() if transport is not None else 0

    def _watch_backlog(self) -> int:
        """The largest unsent backlog of any connection that holds watches."""
        return max((self._write_backlog(c) for c in self._conns if c.watches), default=0)

    async def _watch_sync_loop(self) -> None:
        """Catch up slow or historic watchers from history, and send periodic progress
        notifications to watchers that asked for them.

        Catch-up runs batch after batch, yielding to the event loop in between, for as long
        as there is history to replay and the watchers' connections keep up; it pauses
        while a connection has a large unsent backlog (so it paces itself to the slowest
        reader instead of piling events into memory)."""
        assert self.state is not None
        loop = asyncio.get_running_loop()
        next_progress = loop.time() + self.cfg.progress_notify_interval
        while True:
            hub = self.state.hub
            busy = False
            if hub.unsynced_count() and self._watch_backlog() < WATCH_BACKLOG_PAUSE:
                if hub.sync_unsynced():
                    self._schedule_dispatch()
                    busy = True
            if loop.time() >= next_progress:
                next_progress = loop.time() + self.cfg.progress_notify_interval
                if hub.progress_tick():
                    self._schedule_dispatch()
            await asyncio.sleep(0 if busy else 0.02)

    # ================================================================== client protocol
    async def _serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _ClientConn(writer)
        # Frames up to the transport limit are read whole, so that an oversized request gets
        # its own RequestTooLargeError instead of costing the connection.
        frames = FrameReader(reader)
        tasks: set[asyncio.Task[None]] = set()
        try:
            first = await frames.sized_frames()
            if not first or not self._is_hello(first[0][0]):
                raise E.ProtocolError("the first frame must be a hello")
            self._conns.add(conn)
            pending = first
            while True:
                for f, size in pending:
                    if not isinstance(f, list) or len(f) != 3 or not isinstance(f[0], int):
                        raise E.ProtocolError("a request frame must be [id, method, args]")
                    if f[1] in FAST_WRITES:
                        self._fast_write(conn, f[0], f[1], f[2], size)
                        continue
                    t = asyncio.get_running_loop().create_task(self._handle(conn, f[0], f[1], f[2], size))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
                pending = await frames.sized_frames()
                if not pending:
                    return
        except E.ProtocolError as e:
            log.info("closing client connection: %s", e)
            with contextlib.suppress(Exception):
                writer.write(encode_frame([0, ERROR, e.to_wire()]))
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._conns.discard(conn)
            assert self.state is not None
            for wid in list(conn.watches):
                self.state.hub.cancel(wid)
                self._watch_owner.pop(wid, None)
            for t in tasks:
                t.cancel()
            writer.close()

    def _fast_write(self, conn: _ClientConn, rid: int, method: str, args: Any, size: int) -> None:
        """The hot path for put, delete and txn: validated and proposed right here, answered
        by the apply loop writing the reply frame (no coroutine per request)."""
        writer = conn.writer

        def reply(result: Any) -> None:
            if writer.is_closing():
                return
            if isinstance(result, E.StoreError):
                writer.write(encode_frame([rid, ERROR, result.to_wire()]))
            else:
                writer.write(encode_frame([rid, OK, self.header().to_wire(), result]))

        try:
            if size > self.cfg.max_request_bytes:
                raise E.RequestTooLargeError(
                    f"request is too large: {size} bytes, the limit is {self.cfg.max_request_bytes}"
                )
            assert self.state is not None
            if method == "put":
                self.state.validate_put(PutRequest.from_wire(args))
            elif method == "delete_range":
                self.state.validate_delete(DeleteRangeRequest.from_wire(args))
            else:
                self.state.validate_txn(TxnRequest.from_wire(args))
        except E.StoreError as e:
            reply(e)
            return
        except (TypeError, ValueError, IndexError, KeyError) as e:
            reply(E.InvalidArgumentError(f"malformed {method!r} request: {type(e).__name__}: {e}"))
            return
        self.submit(method, args, reply)

    @staticmethod
    def _is_hello(f: Any) -> bool:
        return isinstance(f, list) and len(f) == 3 and f[1] == "hello" and f[2] == [PROTOCOL]

    async def _handle(self, conn: _ClientConn, rid: int, method: Any, args: Any, size: int) -> None:
        try:
            if size > self.cfg.max_request_bytes:
                raise E.RequestTooLargeError(
                    f"request is too large: {size} bytes, the limit is {self.cfg.max_request_bytes}"
                )
            if method == "watch":
                await self._handle_watch(conn, rid, args)
                return
            if method == "snapshot":
                await self._handle_snapshot(conn, rid)
                return
            handler = self._handlers.get(method) if isinstance(method, str) else None
            if handler is None:
                raise E.InvalidArgumentError(f"unknown method {method!r}")
            result = await handler(self, args)
            conn.writer.write(encode_frame([rid, OK, self.header().to_wire(), result]))
        except E.StoreError as e:
            conn.writer.write(encode_frame([rid, ERROR, e.to_wire()]))
        except (TypeError, ValueError, IndexError, KeyError) as e:
            err = E.InvalidArgumentError(f"malformed {method!r} request: {type(e).__name__}: {e}")
            conn.writer.write(encode_frame([rid, ERROR, err.to_wire()]))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug: report it, keep serving
            log.exception("internal error serving %r", method)
            conn.writer.write(encode_frame([rid, ERROR, E.StoreError(f"internal error: {e}").to_wire()]))

    # ---- handlers: each takes the decoded args and returns the wire result
    async def _h_hello(self, args: Any) -> Any:
        return PROTOCOL

    async def _h_range(self, args: Any) -> Any:
        req = RangeRequest.from_wire(args)
        assert self.state is not None
        self.state.validate_range(req)
        if not req.serializable:
            await self.read_barrier()
        return self.state.kv.range(req).to_wire()

    async def _h_compact(self, args: Any) -> Any:
        req = CompactionRequest.from_wire(args)
        assert self.state is not None
        self.state.validate_compact(req)
        return await self.propose("compact", args)

    async def _h_lease_grant(self, args: Any) -> Any:
        ttl, lease_id = int(args[0]), int(args[1])
        assert self.state is not None
        if lease_id == 0:
            lease_id = self._new_lease_id()
        self.state.validate_lease_grant(lease_id, ttl)
        return await self.propose("lease_grant", [lease_id, ttl])

    def _new_lease_id(self) -> int:
        assert self.state is not None
        while True:
            lease_id = self._rng.getrandbits(62) | 1
            if not self.state.lessor.exists(lease_id):
                return lease_id

    async def _h_lease_revoke(self, args: Any) -> Any:
        lease_id = int(args[0])
        assert self.state is not None
        if not self.state.lessor.exists(lease_id):
            raise E.LeaseNotFoundError(lease_id)
        return await self.propose("lease_revoke", [lease_id])

    async def _h_lease_keepalive(self, args: Any) -> Any:
        lease_id = int(args[0])
        assert self.node is not None and self.state is not None
        if not self.node.is_leader:
            raise self._leader_error()
        ttl = self.state.lessor.renew(lease_id, time.monotonic())
        return [self.state.kv.current_revision, lease_id, ttl]

    async def _h_lease_ttl(self, args: Any) -> Any:
        lease_id, keys = int(args[0]), bool(args[1])
        assert self.node is not None and self.state is not None
        if not self.node.is_leader:
            raise self._leader_error()  # only the leader's clock knows the remaining time
        return self.state.lease_time_to_live(lease_id, keys, time.monotonic()).to_wire()

    async def _h_lease_leases(self, args: Any) -> Any:
        assert self.state is not None
        await self.read_barrier()
        return self.state.lessor.leases()

    async def _h_status(self, args: Any) -> Any:
        return self.status()

    async def _h_members(self, args: Any) -> Any:
        await self.read_barrier()
        return [m.to_wire() for m in self._members_with_roles()]

    async def _h_member_add(self, args: Any) -> Any:
        name, peer_url, client_url, http_url, learner = (
            str(args[0]),
            str(args[1]),
            str(args[2]),
            str(args[3]),
            bool(args[4]),
        )
        for url in (peer_url, client_url, http_url):
            split_url(url)
        assert self.state is not None
        for m in self.state.members.values():
            if m.peer_url == peer_url or m.client_url == client_url or m.name == name:
                raise E.MemberExistsError(f"member {m.id} ({m.name}) already uses that name or address")
        # No add can be in flight here: the Raft core refuses a second membership change
        # until the pending one is applied, so the state alone knows every ID given out.
        new_id = self.state.next_member_id()
        info = MemberInfo(new_id, name, peer_url, client_url, http_url, learner)
        kind = ConfChangeType.ADD_LEARNER if learner else ConfChangeType.ADD_NODE
        await self._propose_conf_change(kind, new_id, info)
        return info.to_wire()

    async def _h_member_remove(self, args: Any) -> Any:
        mid = int(args[0])
        assert self.state is not None
        if mid not in self.state.members:
            raise E.MemberNotFoundError(f"no member with id {mid}")
        voters = self.raw.raft.voters()
        if voters == [mid]:
            raise E.LastVoterError(f"member {mid} is the last voter; removing it would leave no cluster")
        await self._propose_conf_change(ConfChangeType.REMOVE_NODE, mid)
        return None

    async def _h_member_promote(self, args: Any) -> Any:
        mid = int(args[0])
        assert self.state is not None and self.node is not None
        if mid not in self.state.members:
            raise E.MemberNotFoundError(f"no member with id {mid}")
        if not self.node.is_leader:
            raise self._leader_error()
        pr = self.raw.raft.prs.get(mid)
        if pr is None or not pr.is_learner:
            raise E.InvalidArgumentError(f"member {mid} is not a learner")
        if pr.match < self.raw.raft.log.committed * 9 // 10:
            raise E.LearnerNotReadyError(
                f"learner {mid} has only {pr.match} of {self.raw.raft.log.committed} entries; promote it once caught up"
            )
        await self._propose_conf_change(ConfChangeType.ADD_NODE, mid)
        return None

    async def _propose_conf_change(self, kind: ConfChangeType, node_id: int, info: MemberInfo | None = None) -> None:
        """Propose a membership change and wait until it is applied, like any other write
        (its context carries our origin and seq, so the apply loop answers exactly it)."""
        assert self.node is not None
        if not self.node.is_leader:
            raise self._leader_error()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done = _settles(fut)

        self._seq += 1
        seq = self._seq
        context = msgpack.packb([self.id, seq, info.to_wire() if info else None], use_bin_type=True)
        self._waiters[seq] = _Pending(time.monotonic() + self.cfg.request_timeout, done)
        try:
            self.raw.propose_conf_change(ConfChange(kind, node_id, context))
        except ProposalDroppedError as e:
            self._waiters.pop(seq, None)
            raise E.UnavailableError(f"membership change refused: {e}") from e
        self.node.wake()
        await fut

    async def _h_move_leader(self, args: Any) -> Any:
        target = int(args[0])
        assert self.node is not None and self.state is not None
        if target not in self.state.members:
            raise E.MemberNotFoundError(f"no member with id {target}")
        if not self.node.is_leader:
            raise self._leader_error()
        self.raw.transfer_leader(target)
        self.node.wake()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cfg.request_timeout
        while self.raw.raft.lead != target:
            if loop.time() > deadline:
                raise E.TimeoutError_(f"leadership did not move to {target} in time")
            await asyncio.sleep(0.01)
        return None

    async def _h_hash_kv(self, args: Any) -> Any:
        assert self.state is not None
        h, compact = self.state.kv.hash_kv(int(args[0]) if args else 0)
        return [h, compact, self.state.kv.current_revision]

    async def _h_watch_cancel(self, args: Any) -> Any:
        assert self.state is not None
        wid = int(args[0])
        self.state.hub.cancel(wid)
        conn = self._watch_owner.pop(wid, None)
        if conn is not None:
            conn.watches.pop(wid, None)
        return None

    async def _h_watch_progress(self, args: Any) -> Any:
        assert self.state is not None
        self.state.hub.request_progress(int(args[0]) if args else 0)
        self._schedule_dispatch()
        return None

    async def _handle_watch(self, conn: _ClientConn, rid: int, args: Any) -> None:
        req = WatchCreateRequest.from_wire(args)
        assert self.state is not None
        wid = self.state.hub.create(req)
        conn.watches[wid] = rid
        self._watch_owner[wid] = conn
        self._schedule_dispatch()

    async def _handle_snapshot(self, conn: _ClientConn, rid: int) -> None:
        assert self.state is not None
        await self.read_barrier()
        data = self.state.backup()
        header = self.header().to_wire()
        step = 1 << 20
        for off in range(0, len(data), step):
            kind = END if off + step >= len(data) else STREAM
            conn.writer.write(encode_frame([rid, kind, header, data[off : off + step]]))
            await conn.writer.drain()
        if not data:
            conn.writer.write(encode_frame([rid, END, header, b""]))

    _handlers: dict[str, Any] = {
        "hello": _h_hello,
        "range": _h_range,
        "compact": _h_compact,
        "lease_grant": _h_lease_grant,
        "lease_revoke": _h_lease_revoke,
        "lease_keepalive": _h_lease_keepalive,
        "lease_ttl": _h_lease_ttl,
        "lease_leases": _h_lease_leases,
        "status": _h_status,
        "members": _h_members,
        "member_add": _h_member_add,
        "member_remove": _h_member_remove,
        "member_promote": _h_member_promote,
        "move_leader": _h_move_leader,
        "hash_kv": _h_hash_kv,
        "watch_cancel": _h_watch_cancel,
        "watch_progress": _h_watch_progress,
    }

    # ================================================================== status, health, metrics
    def _members_with_roles(self) -> list[MemberInfo]:
        assert self.state is not None
        prs = self.raw.raft.prs
        out = []
        for m in sorted(self.state.members.values(), key=lambda m: m.id):
            pr = prs.get(m.id)
            learner = pr.is_learner if pr is not None else m.is_learner
            out.append(MemberInfo(m.id, m.name, m.peer_url, m.client_url, m.http_url, learner))
        return out

    def role(self) -> str:
        r = self.raw.raft
        pr = r.prs.get(self.id)
        if pr is not None and pr.is_learner:
            return "learner"
        return {
            StateType.LEADER: "leader",
            StateType.FOLLOWER: "follower",
            StateType.CANDIDATE: "candidate",
            StateType.PRE_CANDIDATE: "pre-candidate",
        }[r.state]

    def status(self) -> dict[str, Any]:
        assert self.state is not None
        r = self.raw.raft
        return {
            "id": self.id,
            "name": self.cfg.name,
            "client_url": self.cfg.client_url,
            "peer_url": self.cfg.peer_url,
            "role": self.role(),
            "leader": r.lead,
            "term": r.term,
            "commit_index": r.log.committed,
            "applied_index": self.state.applied_index,
            "revision": self.state.kv.current_revision,
            "compact_revision": self.state.kv.compact_revision,
            "db_keys": self.state.kv.key_count(),
            "db_size": self.state.kv.approx_bytes(),
            "healthy": self._health()[0],
            "cluster_id": self.state.cluster_id,
        }

    def _health(self) -> tuple[bool, dict[str, Any]]:
        if self.node is None or self.state is None:
            return False, {"reason": "starting"}
        r = self.raw.raft
        if r.lead == NONE:
            return False, {"reason": "no leader"}
        lag = r.log.committed - self.state.applied_index
        if lag > 5000:
            return False, {"reason": f"applying: {lag} committed entries not applied yet"}
        return True, {"leader": r.lead, "term": r.term}

    def _metrics(self) -> str:
        assert self.node is not None and self.state is not None
        r = self.raw.raft
        n = self.node
        return render_metrics(
            [
                ("raftkube_raft_term", "gauge", "Current Raft term.", r.term),
                ("raftkube_raft_is_leader", "gauge", "1 if this member is the leader.", int(n.is_leader)),
                ("raftkube_raft_leader_changes_total", "counter", "Leader or role changes seen.", self.leader_changes),
                ("raftkube_raft_commit_index", "gauge", "Raft commit index.", r.log.committed),
                (
                    "raftkube_raft_applied_index",
                    "gauge",
                    "Index applied to the state machine.",
                    self.state.applied_index,
                ),
                (
                    "raftkube_raft_apply_lag",
                    "gauge",
                    "Committed entries not yet applied.",
                    r.log.committed - self.state.applied_index,
                ),
                ("raftkube_proposals_committed_total", "counter", "Proposals applied.", self.proposals_committed),
                (
                    "raftkube_proposals_failed_total",
                    "counter",
                    "Proposals dropped or timed out.",
                    self.proposals_failed,
                ),
                ("raftkube_proposals_pending", "gauge", "Proposals waiting to be applied.", len(self._waiters)),
                ("raftkube_wal_fsync_total", "counter", "WAL fsyncs (one per Ready batch).", n.fsyncs),
                ("raftkube_wal_fsync_seconds_total", "counter", "Time spent persisting Readies.", n.fsync_seconds),
                ("raftkube_wal_entries_total", "counter", "Entries written to the WAL.", n.entries_persisted),
                ("raftkube_apply_seconds_total", "counter", "Time spent applying.", n.apply_seconds),
                ("raftkube_mvcc_revision", "gauge", "Current store revision.", self.state.kv.current_revision),
                ("raftkube_mvcc_db_keys", "gauge", "Live keys.", self.state.kv.key_count()),
                (
                    "raftkube_mvcc_db_bytes",
                    "gauge",
                    "Approximate bytes of keys and values.",
                    self.state.kv.approx_bytes(),
                ),
                ("raftkube_watchers", "gauge", "Open watchers.", self.state.hub.watcher_count()),
                ("raftkube_watch_slow_connections_total", "counter", "Watch streams cut off.", self.slow_watch_conns),
                (
                    "raftkube_snapshots_installed_total",
                    "counter",
                    "Snapshots received from the leader and installed.",
                    self.snapshots_installed,
                ),
            ]
        )
