"""A store member: one OS process holding one Raft node, its disk, and its endpoints.

This module only builds the parts and runs them; each concept lives in its own module:

* `node.RaftNode`: the Raft loop (persist, send, apply, advance), the only user of RawNode;
* `applier.Applier`: applying committed entries and snapshots from the leader;
* `proposals.Proposals` and `reads.ReadIndex`: writes on their way through the log, and
  linearizable reads;
* `kv_service`, `lease_service`, `cluster_service`: what each client request does;
* `client_server.ClientServer` and `watch_streams.WatchStreams`: the client port;
* `transport.PeerTransport`: the peer port; `status.MemberStatus`: status and metrics.

Everything is built in `__init__` (opening the data dir and restoring from it); `start`
binds the sockets and starts the loops.
"""

from __future__ import annotations

import asyncio
import logging
import random
import resource
import ssl

from machinery.process import pki
from store import canaries, failpoints
from store.api import errors as E
from store.api.cluster import MemberInfo
from store.api.protocol import etcd_url, split_url
from store.etcdapi.relay import LeaderRelay
from store.etcdapi.service import EtcdApi
from store.lease.lessor import min_lease_ttl as lease_ttl_floor
from store.raft import Config, RawNode, Ready, SoftState, StateType
from store.raft.types import Message, MessageType
from store.server.applier import Applier
from store.server.apply_log import SNAPSHOT_LOADED, ApplyLog
from store.server.client_server import ClientServer
from store.server.clock import SYSTEM_CLOCK, Clock
from store.server.cluster_service import ClusterService
from store.server.config import MemberConfig
from store.server.http import HttpEndpoint
from store.server.kv_service import KVService
from store.server.lease_service import LeaseService
from store.server.node import RaftNode
from store.server.persistence import Persistence
from store.server.proposals import Proposals
from store.server.reads import ReadIndex
from store.server.snapshots import Snapshots
from store.server.state import ReplicatedState
from store.server.status import MemberStatus
from store.server.transport import PeerTransport
from store.server.watch_streams import WatchStreams

log = logging.getLogger("raftkube.member")

RESERVED_FDS = 256
"""File descriptors kept back from client connections: the WAL, snapshots, peers, logs."""
TLS_DIR = "tls"
"""Where in its data dir a member finds its certificate, key and the cluster CA."""


class Member:
    def __init__(self, cfg: MemberConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.cfg = cfg
        self.id = cfg.member_id
        self.clock = clock
        failpoints.check_env()
        canaries.check_env()
        self.client_tls, self.peer_server_tls, self.peer_client_tls = self._tls_contexts()
        self.persistence = p = Persistence.open(cfg.data_dir, cfg.member_id, cfg.cluster_id, fsync=cfg.fsync)
        self.apply_log = ApplyLog.from_env(cfg.data_dir)
        """Test-only evidence for the chaos checker (see store/server/apply_log.py)."""
        self.state = self._restore_state()
        applied = p.snapshot.metadata.index if p.snapshot is not None else 0
        self.state.applied_index = applied
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
        self.transport = PeerTransport(
            self.id,
            self._on_peer_messages,
            self._on_unreachable,
            self._on_snapshot_status,
            server_tls=self.peer_server_tls,
            client_tls=self.peer_client_tls,
            is_removed=lambda peer: peer in self.state.removed,
        )
        self.node = node = RaftNode(
            raw,
            p.storage,
            persist=p.persist_ready,
            save_snapshot_file=p.save_snapshot_file,
            send=self.transport.send,
            apply=self._apply,
            tick_seconds=cfg.tick_ms / 1000,
            on_tick=self._on_tick,
        )
        timeout = cfg.request_timeout
        self.proposals = Proposals(self.id, node, clock, timeout, self._leader_error)
        self.reads = ReadIndex(node, timeout, self._leader_error, clock.monotonic)
        self.watches = WatchStreams(
            self.state,
            self._header,
            cfg.progress_notify_interval,
            cfg.watch_backlog_limit,
            output_limit=cfg.watch_output_limit,
        )
        self.snapshots = Snapshots(self.state, node, p, cfg.snapshot_count, cfg.snapshot_catchup_entries, applied)
        self.applier = Applier(
            self.state,
            node,
            self.proposals,
            self.reads,
            self.watches,
            self.snapshots,
            clock,
            self.apply_log,
            on_membership=self._sync_peers,
            on_role_change=self._on_role_change,
        )
        self.member_status = MemberStatus(cfg, self.state, node, self._counters)
        self.leases = LeaseService(self.state, node, self.proposals, self.reads, clock, self._leader_error)
        kv = KVService(self.state, self.proposals, self.reads)
        cluster = ClusterService(
            self.state, node, self.proposals, self.reads, self.member_status, timeout, self._leader_error
        )
        self.leader_relay = LeaderRelay(node, lambda: self.state.members, self.peer_client_tls, self._leader_error)
        etcd = EtcdApi(
            kv,
            self.leases,
            cluster,
            self.watches,
            self._header,
            self._etcd_url,
            self.leader_relay,
            max_request_bytes=cfg.max_request_bytes,
        )
        self.clients = ClientServer(
            kv,
            self.leases,
            cluster,
            self.watches,
            self._header,
            etcd_routes=etcd.routes(),
            max_request_bytes=cfg.max_request_bytes,
            max_connections=self._connection_limit(),
            hello_timeout=cfg.hello_timeout,
            frame_timeout=cfg.frame_timeout,
            ssl_context=self.client_tls,
        )
        self.http = HttpEndpoint(self.member_status.health, self.member_status.metrics)
        self.leader_changes = 0
        self._tasks: list[asyncio.Task[None]] = []

    # ================================================================== construction
    def _tls_contexts(self) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None, ssl.SSLContext | None]:
        """(client port, peer port, dialling peers); all None for an --insecure member."""
        if self.cfg.insecure:
            log.warning(
                "member %d runs WITHOUT TLS (--insecure): anyone who can reach its ports can read and "
                "write every key and impersonate its peers",
                self.id,
            )
            return None, None, None
        files = pki.load_files(self.cfg.data_dir / TLS_DIR, pki.MEMBER)
        clients = pki.server_context(files)
        clients.set_alpn_protocols(["h2"])  # gRPC clients (the etcd API) ask for h2; ours ask for nothing
        return clients, pki.server_context(files), pki.client_context(files.ca, files.cert, files.key)

    def _etcd_url(self, client_url: str) -> str:
        return etcd_url(client_url, self.cfg.insecure)

    def _restore_state(self) -> ReplicatedState:
        cfg, p = self.cfg, self.persistence
        snap = p.snapshot
        ttl = self.min_lease_ttl
        now = self.clock.monotonic()
        backup = cfg.data_dir / "restore_from.bin"
        if snap is not None and snap.data:
            state = ReplicatedState.restore(snap.data, self.id, min_lease_ttl=ttl, now=now)
            if self.apply_log is not None:
                meta = snap.metadata
                self.apply_log.record(meta.index, meta.term, SNAPSHOT_LOADED, b"", state.kv.current_revision, now)
            return state
        if p.is_new and not cfg.join and backup.exists():
            # `store snapshot restore`: a new cluster that starts from a backup's state.
            return ReplicatedState.from_backup(
                backup.read_bytes(), cfg.cluster_id, self.id, cfg.initial_cluster, min_lease_ttl=ttl
            )
        members = cfg.initial_cluster if not cfg.join else []
        return ReplicatedState.new(cfg.cluster_id, self.id, members, min_lease_ttl=ttl)

    def _connection_limit(self) -> int:
        """Client connections allowed: never so many that the WAL or a peer could be left
        without a file descriptor (the soft limit is raised to the hard one first)."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard and hard != resource.RLIM_INFINITY:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                soft = hard
            except (ValueError, OSError):
                pass
        spare = soft - RESERVED_FDS if soft != resource.RLIM_INFINITY else self.cfg.max_client_connections
        return max(1, min(self.cfg.max_client_connections, spare))

    @property
    def min_lease_ttl(self) -> int:
        """etcd's rule: a lease must outlive an election (1.5 election timeouts)."""
        return lease_ttl_floor(self.cfg.election_ticks, self.cfg.tick_ms)

    # ================================================================== lifecycle
    async def start(self) -> None:
        cfg = self.cfg
        if canaries.ACTIVE:
            log.warning(
                "UNSAFE MODES ON (%s=%s): this member breaks its guarantees on purpose; for chaos tests only",
                canaries.ENV,
                ",".join(canaries.ACTIVE),
            )
        host, port = split_url(cfg.peer_url)
        await self.transport.listen(host, port)
        self._sync_peers()
        host, port = split_url(cfg.client_url)
        await self.clients.listen(host, port)
        host, port = split_url(cfg.http_url)
        await self.http.listen(host, port)
        self.node.start()
        self._tasks.append(asyncio.get_running_loop().create_task(self.watches.sync_loop(), name="watch-sync"))
        self.applier.freeze_heap()
        log.info("member %d (%s) serving clients on %s, peers on %s", self.id, cfg.name, cfg.client_url, cfg.peer_url)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await self.clients.close()
        await self.leader_relay.close()
        await self.http.close()
        await self.node.stop()
        await self.transport.close()
        self.persistence.close()

    async def wait_stopped(self) -> None:
        await self.node.stopped.wait()

    # ================================================================== raft plumbing
    def _known_members(self) -> list[MemberInfo]:
        if self.state.members:
            return list(self.state.members.values())
        return list(self.cfg.initial_cluster)

    def _sync_peers(self) -> None:
        """Dial every member of the current membership; forget the ones that left."""
        known = {m.id: m for m in self._known_members()}
        for m in known.values():
            if m.id != self.id:
                h, p = split_url(self.cfg.dial_url(m))
                self.transport.add_peer(m.id, h, p)
        for pid in list(self.transport.peers):
            if pid not in known:
                self.transport.remove_peer(pid)

    def _on_peer_messages(self, msgs: list[Message]) -> None:
        ok = []
        for m in msgs:
            if m.type == MessageType.SNAP and m.snapshot is not None and m.snapshot.data:
                # Checked before the core sees it: bytes that do not restore must never be
                # made durable as this member's state (it could not restart from them).
                try:
                    ReplicatedState.check_snapshot(m.snapshot.data)
                except E.DiskError as err:
                    log.error("refused a snapshot from member %d: %s", m.frm, err)
                    continue
            ok.append(m)
        self.node.step(ok)

    def _on_unreachable(self, peer: int) -> None:
        self.node.report_unreachable(peer)

    def _on_snapshot_status(self, peer: int, failed: bool) -> None:
        self.node.report_snapshot(peer, failed)

    def _apply(self, rd: Ready) -> None:
        # (The node is built before the applier, which needs it: hence this indirection.)
        self.applier.apply(rd)

    def _header(self) -> list[int]:
        return [self.state.cluster_id, self.id, self.state.kv.current_revision, self.node.term]

    def _leader_error(self) -> E.StoreError:
        lead = self.node.lead
        if not self.node.has_leader:
            return E.NoLeaderError("no leader: an election is under way or this member is cut off")
        info = self.state.members.get(lead)
        return E.NotLeaderError(
            f"member {self.id} is not the leader; the leader is {lead}",
            leader_id=lead,
            leader_client_url=info.client_url if info else "",
        )

    def _on_tick(self) -> None:
        """Duties on the clock: time out waiting writes; as leader, expire leases; ask again
        for read rounds that got no answer."""
        self.proposals.expire()
        self.leases.expire()
        self.reads.retry()

    def _on_role_change(self, soft: SoftState) -> None:
        self.leader_changes += 1
        if soft.raft_state == StateType.LEADER:
            # TTLs restart on a new leader: the old leader's keep-alives may not have reached us.
            self.state.lessor.promote(self.clock.monotonic())
        else:
            self.state.lessor.demote()
            self.proposals.fail_all(
                E.LeaderChangedError("leader changed before the request was applied; it may or may not be")
            )
        self.reads.leader_changed()

    def _counters(self) -> list[tuple[str, str, str, float]]:
        return [
            ("raftkube_raft_leader_changes_total", "counter", "Leader or role changes seen.", self.leader_changes),
            ("raftkube_proposals_committed_total", "counter", "Proposals applied.", self.proposals.committed),
            ("raftkube_proposals_failed_total", "counter", "Proposals dropped or timed out.", self.proposals.failed),
            ("raftkube_proposals_pending", "gauge", "Proposals waiting to be applied.", len(self.proposals)),
            (
                "raftkube_proposals_refused_total",
                "counter",
                "Writes refused because too many were waiting to commit.",
                self.proposals.refused,
            ),
            ("raftkube_watch_slow_connections_total", "counter", "Watch streams cut off.", self.watches.cut_off),
            (
                "raftkube_watch_unsent_bytes",
                "gauge",
                "Unsent watch output of all client connections, as last counted.",
                self.watches.budget.total,
            ),
            (
                "raftkube_snapshots_installed_total",
                "counter",
                "Snapshots received from the leader and installed.",
                self.applier.snapshots_installed,
            ),
            (
                "raftkube_apply_refused_entries_total",
                "counter",
                "Committed entries that could not be applied (refused alike by every member).",
                self.applier.entries_refused,
            ),
            ("raftkube_client_connections", "gauge", "Open client connections.", len(self.clients.conns)),
            (
                "raftkube_client_connections_refused_total",
                "counter",
                "Client connections refused over the limit.",
                self.clients.refused_connections,
            ),
            (
                "raftkube_peer_protocol_errors_total",
                "counter",
                "Peer connections closed.",
                self.transport.protocol_errors,
            ),
        ]
