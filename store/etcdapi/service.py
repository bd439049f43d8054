"""etcd's KV, Watch, Lease, Cluster and Maintenance services on a member, over the same
services our own protocol uses (store/server/*_service.py): one store, two front doors.

What differs from our protocol is etcd's, and said where it is done:
* writes and lease grants/revokes sent to a follower are forwarded to the leader through
  Raft (etcd's proposal forwarding), so every member takes every request, as etcd clients
  (kube-apiserver round-robins its endpoints) expect;
* `Status.version` is the etcd release whose API this is ("3.6.0"), which clients read for
  feature detection (kube-apiserver 1.33 turns consistent reads from its cache off below
  3.5.13);
* Defragment is a no-op that says so in the member log: the store keeps no free pages;
* Snapshot streams our backup in etcd's framing (etcdutl cannot restore it: raftkube's own
  `store snapshot restore` does), so `etcdctl snapshot save` checks and saves it;
* auth is mutual TLS on the connection; etcd's users and roles are not served (AuthStatus
  says disabled, the rest FAILED_PRECONDITION "authentication is not enabled").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from machinery.http2 import ENHANCE_YOUR_CALM
from store.api import errors as E
from store.api.cluster import EMPTY, HashKVRequest, MemberAddRequest, MemberIdRequest, MemberUpdateRequest
from store.api.kv import CompactionResponse, DeleteRangeResponse, PutResponse, TxnResponse
from store.api.lease import LeaseGrantRequest, LeaseIdRequest, LeaseKeepAliveResponse, LeaseTimeToLiveRequest
from store.api.protocol import MAX_REQUEST_BYTES
from store.etcdapi import convert
from store.etcdapi.convert import FAILED_PRECONDITION, UNIMPLEMENTED, GrpcStatus
from store.etcdapi.grpc import GRPC_OVERHEAD, Call, Route
from store.etcdapi.messages import SERVICES, pb
from store.etcdapi.relay import LeaderRelay
from store.etcdapi.snapshot_file import etcd_snapshot_bytes
from store.etcdapi.watch import WatchCall
from store.server.cluster_service import ClusterService
from store.server.kv_service import KVService
from store.server.lease_service import LeaseService
from store.server.watch_streams import WatchStreams

log = logging.getLogger("raftkube.etcdapi")

ETCD_VERSION = "3.6.0"
SNAPSHOT_CHUNK = 32 << 10  # etcd sends its snapshot in 32 KiB pieces
NOT_ENABLED = GrpcStatus(FAILED_PRECONDITION, "etcdserver: authentication is not enabled")
KEEPALIVE_UNREAD = 64 << 10
"""Bytes of keep-alive answers a LeaseKeepAlive stream may leave waiting for its client's
flow-control window; beyond, the stream is reset (ENHANCE_YOUR_CALM) and what it owed is
dropped.  (etcd stops reading a stream whose answers wait; ours are answered at once, so a
client that sends keep-alives and never takes the answers is bounded here.)"""
BAD_TRANSFEREE = GrpcStatus(FAILED_PRECONDITION, "etcdserver: bad leader transferee")

Header = Callable[[], list[int]]


class EtcdApi:
    """The routes of every etcd RPC a member serves (grpc.Route by path)."""

    def __init__(
        self,
        kv: KVService,
        leases: LeaseService,
        cluster: ClusterService,
        watches: WatchStreams,
        header: Header,
        etcd_url: Callable[[str], str],
        relay: LeaderRelay,
        max_request_bytes: int = MAX_REQUEST_BYTES,
    ) -> None:
        self.kv = kv
        self.max_request_bytes = max_request_bytes
        """A write larger than this is etcd's "request is too large" (gRPC takes messages up to
        512 KiB larger: grpc.GRPC_OVERHEAD)."""
        self.leases = leases
        self.cluster = cluster
        self.watches = watches
        self.header = header
        self.etcd_url = etcd_url
        """Our client URL -> the URL etcd clients dial for it (https:// or http://)."""
        self.relay = relay
        """Keep-alives and time-to-live asked of a follower go to the leader through it."""
        self._tasks: set[asyncio.Task[None]] = set()

    def routes(self) -> dict[bytes, Route]:
        unary: dict[str, Callable[[Call, Any], None]] = {
            "KV/Range": self.range,
            "KV/Put": self.put,
            "KV/DeleteRange": self.delete_range,
            "KV/Txn": self.txn,
            "KV/Compact": self.compact,
            "Lease/LeaseGrant": self.lease_grant,
            "Lease/LeaseRevoke": self.lease_revoke,
            "Lease/LeaseTimeToLive": self.lease_ttl,
            "Lease/LeaseLeases": self.lease_leases,
            "Cluster/MemberList": self.member_list,
            "Cluster/MemberAdd": self.member_add,
            "Cluster/MemberUpdate": self.member_update,
            "Cluster/MemberRemove": self.member_remove,
            "Cluster/MemberPromote": self.member_promote,
            "Maintenance/Status": self.status,
            "Maintenance/Alarm": self.alarm,
            "Maintenance/Hash": self.hash,
            "Maintenance/HashKV": self.hash_kv,
            "Maintenance/MoveLeader": self.move_leader,
            "Maintenance/Defragment": self.defragment,
            "Auth/AuthStatus": self.auth_status,
        }
        streaming: dict[str, Callable[[Call], Any]] = {
            "Watch/Watch": lambda call: WatchCall(
                call, self.watches, self.header, self.max_request_bytes + GRPC_OVERHEAD
            ),
            "Lease/LeaseKeepAlive": lambda call: KeepAliveCall(self, call),
            "Maintenance/Snapshot": lambda call: SnapshotCall(self, call),
        }
        routes: dict[bytes, Route] = {}
        for service, methods in SERVICES.items():
            for name, method in methods.items():
                key = f"{service}/{name}"
                if key in streaming:
                    routes[method.path.encode()] = Route(method, streaming=streaming[key])
                else:
                    routes[method.path.encode()] = Route(method, unary=unary.get(key, _unsupported(service, name)))
        return routes

    # -- plumbing -------------------------------------------------------------------------
    def _later(self, call: Call, work: Awaitable[Any], answer: Callable[[Any], Any]) -> None:
        """Run `work` as a task; reply with `answer(result)`, or fail with the error's status."""

        conn = call.stream.conn

        async def run() -> None:
            try:
                result = await work
            except E.StoreError as e:
                call.fail(convert.status_of(e))
                return
            except GrpcStatus as s:
                call.fail(s)
                return
            except Exception as e:  # a bug: this call fails, the member goes on
                log.exception("internal error serving %s", call.route.method.path)
                call.fail(GrpcStatus(convert.INTERNAL, f"etcdserver: internal error: {type(e).__name__}: {e}"))
                return
            finally:
                conn.working -= 1
            call.reply(answer(result))

        conn.working += 1  # counted until the work ends, even if the client resets the call
        self.spawn(run())

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as a task kept until it ends (a call's answer that needs an await)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _write(self, call: Call, req: Any, answer: Callable[[Any], Any]) -> None:
        """The write hot path: checked and proposed now (forwarded by a follower), answered
        from the apply loop's callback."""

        def done(result: Any) -> None:
            if isinstance(result, E.StoreError):
                call.fail(convert.status_of(result))
            else:
                call.reply(answer(result))

        try:
            self.kv.write(req, done, forward=True)
        except E.StoreError as e:
            call.fail(convert.status_of(e))

    def _too_large(self, call: Call, m: Any) -> bool:
        """etcd refuses a proposal over --max-request-bytes, whatever gRPC let through."""
        if m.ByteSize() <= self.max_request_bytes:
            return False
        call.fail(convert.status_of(E.RequestTooLargeError("request is too large")))
        return True

    # -- KV ---------------------------------------------------------------------------------
    def range(self, call: Call, m: Any) -> None:
        req = convert.range_request(m)
        h = self.header()
        self._later(call, self.kv.range(req), lambda r: convert.range_response(r, h))

    def put(self, call: Call, m: Any) -> None:
        if self._too_large(call, m):
            return
        self._write(
            call, convert.put_request(m), lambda w: convert.put_response(PutResponse.from_wire(w), self.header())
        )

    def delete_range(self, call: Call, m: Any) -> None:
        if self._too_large(call, m):
            return
        self._write(
            call,
            convert.delete_request(m),
            lambda w: convert.delete_response(DeleteRangeResponse.from_wire(w), self.header()),
        )

    def txn(self, call: Call, m: Any) -> None:
        if self._too_large(call, m):
            return
        self._write(
            call, convert.txn_request(m), lambda w: convert.txn_response(TxnResponse.from_wire(w), self.header())
        )

    def compact(self, call: Call, m: Any) -> None:
        def answer(r: CompactionResponse) -> Any:
            return pb.CompactionResponse(header=convert.header(self.header(), r.revision))

        self._later(call, self.kv.compact(convert.compaction_request(m), forward=True), answer)

    # -- Lease ------------------------------------------------------------------------------
    def lease_grant(self, call: Call, m: Any) -> None:
        # etcd grants a TTL <= 0 as any TTL below its minimum: raised to the minimum (lessor.Grant);
        # the store refuses it, and raises 1 to the same minimum
        req = LeaseGrantRequest(max(m.TTL, 1), m.ID)
        self._later(
            call, self.leases.grant(req, forward=True), lambda r: convert.lease_grant_response(r, self.header())
        )

    def lease_revoke(self, call: Call, m: Any) -> None:
        def answer(r: Any) -> Any:
            return pb.LeaseRevokeResponse(header=convert.header(self.header(), r.revision))

        self._later(call, self.leases.revoke(LeaseIdRequest(m.ID), forward=True), answer)

    def lease_ttl(self, call: Call, m: Any) -> None:
        if self.leases.node.is_leader:
            work = self.leases.time_to_live(LeaseTimeToLiveRequest(m.ID, m.keys))
        else:
            work = self.relay.time_to_live(m.ID, m.keys)
        self._later(call, work, lambda r: convert.lease_ttl_response(r, self.header()))

    def lease_leases(self, call: Call, m: Any) -> None:
        def answer(r: Any) -> Any:
            return pb.LeaseLeasesResponse(
                header=convert.header(self.header()), leases=[pb.LeaseStatus(ID=i) for i in r.ids]
            )

        self._later(call, self.leases.leases(EMPTY), answer)

    # -- Cluster ----------------------------------------------------------------------------
    # etcd's Cluster service answers without a revision in its headers (cluster, member, term)
    def member_list(self, call: Call, m: Any) -> None:
        def answer(r: Any) -> Any:
            members = [convert.member(x, self.etcd_url(x.client_url)) for x in r.members]
            return pb.MemberListResponse(header=convert.header(self.header(), 0), members=members)

        self._later(call, self.cluster.members(EMPTY), answer)

    def _membership(self) -> ClusterService | LeaderRelay:
        """Who makes a membership change asked of this member: it, when it leads; otherwise the
        leader, through the relay (etcd takes them on any member)."""
        return self.cluster if self.cluster.node.is_leader else self.relay

    def _members(self, r: Any) -> list[Any]:
        return [convert.member(x, self.etcd_url(x.client_url)) for x in r.members]

    def member_add(self, call: Call, m: Any) -> None:
        """etcd's MemberAdd registers a member by its peer URL; it runs once started with
        `raftkube store member add NAME --id ID` (which gives it its name and the client and
        HTTP addresses it listens on).  Until then its client and HTTP URLs follow etcd's port
        convention around the peer port (client one below, metrics one above: 2379, 2380,
        2381) and it has no name, which etcd clients show as "unstarted"."""

        async def work() -> Any:
            url, host, port = convert.peer_url(m.peerURLs)
            if not 1 < port < 65535:
                raise convert.BAD_MEMBER_URLS
            client, http = f"tcp://{host}:{port - 1}", f"http://{host}:{port + 1}"
            added = await self._membership().member_add(MemberAddRequest("", url, client, http, m.isLearner))
            return added, await self.cluster.members(EMPTY)

        def answer(r: Any) -> Any:
            added, members = r
            return pb.MemberAddResponse(
                header=convert.header(self.header(), 0),
                member=pb.Member(ID=added.id, peerURLs=list(m.peerURLs), isLearner=added.is_learner),
                members=self._members(members),
            )

        self._later(call, work(), answer)

    def member_update(self, call: Call, m: Any) -> None:
        """etcd's MemberUpdate: a member's peer URL, replaced (the member is restarted on it
        by whoever runs it, as with etcd)."""

        async def work() -> Any:
            url, _, _ = convert.peer_url(m.peerURLs)
            old = next((x for x in (await self.cluster.members(EMPTY)).members if x.id == m.ID), None)
            if old is None:
                raise E.MemberNotFoundError(f"no member with id {m.ID}")
            change = MemberUpdateRequest(m.ID, old.name, url, old.client_url, old.http_url)
            await self._membership().member_update(change)
            return await self.cluster.members(EMPTY)

        self._later(
            call,
            work(),
            lambda r: pb.MemberUpdateResponse(header=convert.header(self.header(), 0), members=self._members(r)),
        )

    def member_remove(self, call: Call, m: Any) -> None:
        async def work() -> Any:
            await self._membership().member_remove(MemberIdRequest(m.ID))
            return await self.cluster.members(EMPTY)

        def answer(r: Any) -> Any:
            members = [convert.member(x, self.etcd_url(x.client_url)) for x in r.members]
            return pb.MemberRemoveResponse(header=convert.header(self.header(), 0), members=members)

        self._later(call, work(), answer)

    def member_promote(self, call: Call, m: Any) -> None:
        async def work() -> Any:
            await self._membership().member_promote(MemberIdRequest(m.ID))
            return await self.cluster.members(EMPTY)

        def answer(r: Any) -> Any:
            members = [convert.member(x, self.etcd_url(x.client_url)) for x in r.members]
            return pb.MemberPromoteResponse(header=convert.header(self.header(), 0), members=members)

        self._later(call, work(), answer)

    # -- Maintenance ------------------------------------------------------------------------
    def status(self, call: Call, m: Any) -> None:
        def answer(s: Any) -> Any:
            errors = [] if s.healthy else ["raftkube: member unhealthy (see its /health)"]
            return convert.status_response(s, self.header(), ETCD_VERSION, errors)

        self._later(call, self.cluster.status(EMPTY), answer)

    def alarm(self, call: Call, m: Any) -> None:
        """No alarms are raised by hand here; a member whose disk is full reports NOSPACE."""
        h = self.header()
        alarms = []
        if self.cluster.node.no_space:
            alarms.append(pb.AlarmMember(memberID=h[1], alarm=pb.AlarmType.Value("NOSPACE")))
        call.reply(pb.AlarmResponse(header=convert.header(h), alarms=alarms))

    def hash(self, call: Call, m: Any) -> None:
        """etcd's Hash covers its whole backend; ours is the HashKV of the current revision."""

        def answer(r: Any) -> Any:
            return pb.HashResponse(header=convert.header(self.header(), r.revision), hash=r.hash & 0xFFFFFFFF)

        self._later(call, self.kv.hash_kv(HashKVRequest(0)), answer)

    def hash_kv(self, call: Call, m: Any) -> None:
        self._later(
            call,
            self.kv.hash_kv(HashKVRequest(max(m.revision, 0))),
            lambda r: convert.hash_kv_response(r, self.header()),
        )

    def move_leader(self, call: Call, m: Any) -> None:
        """In etcd's order: only the leader hands over ("not leader"), and only to a voting
        member ("bad leader transferee"); etcd's answer has no header."""
        if not self.cluster.node.is_leader:
            call.fail(convert.status_of(self.cluster.leader_error()))
            return
        target = self.cluster.state.members.get(m.targetID)
        if target is None or target.is_learner:
            call.fail(BAD_TRANSFEREE)
            return

        def answer(_: Any) -> Any:
            return pb.MoveLeaderResponse()

        self._later(call, self.cluster.move_leader(MemberIdRequest(m.targetID)), answer)

    def defragment(self, call: Call, m: Any) -> None:
        log.info("defragment asked by %s: nothing to do (the store keeps no free pages to give back)", call.peer)
        call.reply(pb.DefragmentResponse(header=convert.header(self.header())))

    def auth_status(self, call: Call, m: Any) -> None:
        call.reply(pb.AuthStatusResponse(header=convert.header(self.header()), enabled=False))


def _unsupported(service: str, name: str) -> Callable[[Call, Any], None]:
    def refuse(call: Call, m: Any) -> None:
        if service == "Auth":
            call.fail(NOT_ENABLED)
        else:
            call.fail(GrpcStatus(UNIMPLEMENTED, f"raftkube: {service}.{name} is not served"))

    return refuse


class KeepAliveCall:
    """LeaseKeepAlive: each request renews one lease and is answered with its TTL (0: the
    lease does not exist, as etcd answers)."""

    def __init__(self, api: EtcdApi, call: Call) -> None:
        self.api = api
        self.call = call

    def message(self, msg: Any) -> None:
        if not self.api.leases.node.is_leader:
            self.api.spawn(self._relayed(msg.ID))
            return
        try:
            r = self.api.leases.keepalive_now(LeaseIdRequest(msg.ID))
        except E.StoreError as e:
            self._answer(msg.ID, e)
            return
        self._answer(msg.ID, r)

    async def _relayed(self, lease_id: int) -> None:
        try:
            r: LeaseKeepAliveResponse | E.StoreError = await self.api.relay.keepalive(lease_id)
        except E.StoreError as e:
            r = e
        self._answer(lease_id, r)

    def _answer(self, lease_id: int, r: LeaseKeepAliveResponse | E.StoreError) -> None:
        unread = self.call.stream.queued
        if unread > KEEPALIVE_UNREAD:
            self.call.reset(
                ENHANCE_YOUR_CALM, f"{unread} bytes of keep-alive answers unread (at most {KEEPALIVE_UNREAD})"
            )
            return
        h = self.api.header()
        if isinstance(r, E.LeaseNotFoundError):  # etcd answers TTL 0 for a lease that is gone
            self.call.send(pb.LeaseKeepAliveResponse(header=convert.header(h), ID=lease_id, TTL=0))
        elif isinstance(r, E.StoreError):
            self.call.fail(convert.status_of(r))
        else:
            self.call.send(convert.lease_keepalive_response(r, h))

    def half_closed(self) -> None:
        self.call.finish()

    def cancelled(self) -> None:
        pass


class SnapshotCall:
    """Maintenance.Snapshot: the backup, in 32 KiB pieces, as etcd frames it: the data padded
    to a multiple of 512 bytes and followed by its SHA-256, which `etcdctl snapshot save`
    checks."""

    def __init__(self, api: EtcdApi, call: Call) -> None:
        self.api = api
        self.call = call
        self.started = False

    def message(self, msg: Any) -> None:
        if self.started:
            return
        self.started = True
        self.api.spawn(self._send())

    async def _send(self) -> None:
        try:
            data = await self.api.cluster.backup()
        except E.StoreError as e:
            self.call.fail(convert.status_of(e))
            return
        body = etcd_snapshot_bytes(data)
        h = self.api.header()
        for off in range(0, len(body), SNAPSHOT_CHUNK):
            if self.call.closed:
                return
            piece = body[off : off + SNAPSHOT_CHUNK]
            remaining = len(body) - off - len(piece)
            self.call.send(
                pb.SnapshotResponse(
                    header=convert.header(h), remaining_bytes=remaining, blob=piece, version=ETCD_VERSION
                )
            )
            while self.call.backlog() > 4 * SNAPSHOT_CHUNK and not self.call.closed:
                await asyncio.sleep(0.005)  # the client reads at its pace; we hold one piece or so
        self.call.finish()

    def half_closed(self) -> None:
        pass

    def cancelled(self) -> None:
        pass
