"""The async store client: endpoint list, leader discovery, safe retries, watch resume.

Requests go to the leader when it is known (writes and linearizable reads end up there
anyway); a member that is not the leader answers NotLeaderError with a hint, and the client
follows it.  What is retried is decided by the error's outcome and the method
(`errors.may_retry`):

* anything refused before it was proposed (not leader, no leader, cannot connect): every
  request, on another member, until the request deadline;
* reads, lease keep-alives and status whose outcome is unknown (lost connection, timeout);
* never a write whose outcome is unknown: the caller gets ConnectionLost or the timeout
  (a retry could apply it twice).

Every call is typed by its method in the registry (store/api/methods.py): `call(PUT, req)`
returns the PutResponse; the convenience methods below wrap it.  Connections use TLS with a
client certificate unless the client is made without one (`tls=None`: plaintext, for
clusters started with --insecure).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeVar

from store.api import methods as M
from store.api.cluster import (
    EMPTY,
    HashKVRequest,
    MemberAddRequest,
    MemberIdRequest,
    MemberInfo,
    MemberUpdateRequest,
    StatusResponse,
)
from store.api.errors import ConnectionLost, NotLeaderError, ProtocolError, StoreError, UnavailableError, may_retry
from store.api.kv import (
    CompactionRequest,
    CompactionResponse,
    DeleteRangeRequest,
    DeleteRangeResponse,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
    prefix_end,
)
from store.api.lease import (
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseIdRequest,
    LeaseKeepAliveResponse,
    LeaseTimeToLiveRequest,
    LeaseTimeToLiveResponse,
)
from store.api.protocol import END, ERROR, Header
from store.api.watch import WatchCreateRequest, WatchFilter, WatchResponse
from store.client.connection import Connection

MAX_BACKOFF = 0.1
"""Seconds between retry rounds at most (from 20 ms, doubling)."""

Rs = TypeVar("Rs")


class Request(Protocol):
    def to_wire(self) -> Any: ...


class Client:
    def __init__(
        self,
        endpoints: list[str],
        timeout: float = 5.0,
        connect_timeout: float = 1.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("the client needs at least one endpoint")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.tls = tls
        self._conns: dict[str, Connection] = {}
        self._closed = False
        self._connecting: dict[str, asyncio.Future[Connection]] = {}
        """One open attempt per endpoint, shared by every request that needs it meanwhile."""
        self._preferred: str | None = None
        self._rng = random.Random()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection.  A request or watch still running afterwards gets
        UnavailableError instead of opening a new one (which nobody would close)."""
        self._closed = True
        for attempt in list(self._connecting.values()):
            attempt.cancel()  # Connection.open closes its socket when cancelled
        conns = list(self._conns.values())
        self._conns.clear()
        for c in conns:
            c.abort()  # all sockets closed before the first await, in case we are cancelled
        for c in conns:
            await c.close()

    # ------------------------------------------------------------------ plumbing
    async def _conn(self, endpoint: str) -> Connection:
        """The open connection to `endpoint`, opening it if needed.  Concurrent callers share
        one attempt: 64 requests at once on a fresh client must not open 64 sockets (all but
        the last one stored would leak)."""
        if self._closed:
            raise UnavailableError("the client is closed")
        c = self._conns.get(endpoint)
        if c is not None:
            if c.is_open:
                return c
            del self._conns[endpoint]
            c.abort()  # its reader has ended; release the socket before replacing it
        attempt = self._connecting.get(endpoint)
        if attempt is None:
            attempt = asyncio.ensure_future(self._open(endpoint))
            self._connecting[endpoint] = attempt
            attempt.add_done_callback(lambda f: self._opened(endpoint, f))
        # Shielded: one caller giving up (cancelled) does not cancel the others' attempt.
        return await asyncio.shield(attempt)

    async def _open(self, endpoint: str) -> Connection:
        c = Connection(endpoint, self.tls)
        await c.open(self.connect_timeout)
        if self._closed:  # closed while we were connecting
            await c.close()
            raise UnavailableError("the client is closed")
        self._conns[endpoint] = c
        return c

    def _opened(self, endpoint: str, attempt: asyncio.Future[Connection]) -> None:
        if self._connecting.get(endpoint) is attempt:
            del self._connecting[endpoint]
        if not attempt.cancelled():
            attempt.exception()  # retrieved here: every waiter may have gone

    def _order(self) -> list[str]:
        rest = [e for e in self.endpoints if e != self._preferred]
        self._rng.shuffle(rest)
        return ([self._preferred] if self._preferred else []) + rest

    def _learn_leader(self, err: NotLeaderError) -> None:
        hint = err.details.get("leader_client_url")
        if hint:
            if hint not in self.endpoints:
                self.endpoints.append(hint)
            self._preferred = hint

    async def call(self, method: M.Method[Any, Rs], req: Request, endpoint: str | None = None) -> tuple[Header, Rs]:
        """Send one typed request (to `endpoint`, or wherever it can be served), retrying
        what is safe; returns the member's header and the typed response."""
        header, result = await self.request(method, req.to_wire(), endpoint)
        try:
            return header, method.decode_response(result)
        except StoreError as e:
            raise ProtocolError(f"malformed {method.name} response from member {header.member_id}: {e}") from None

    async def request(self, method: M.Method[Any, Any], args: Any, endpoint: str | None = None) -> tuple[Header, Any]:
        """Send one request in wire form and return the wire result (see `call`)."""
        name = method.name
        if endpoint is None and self._preferred is not None:
            # The common case, kept cheap: an open connection to the member that answered last.
            conn = self._conns.get(self._preferred)
            if conn is not None and conn.is_open:
                try:
                    return await conn.call(name, args, timeout=self.timeout)
                except StoreError as e:
                    if not may_retry(e, method.idempotent):
                        raise
                    if isinstance(e, NotLeaderError):
                        self._learn_leader(e)
                    # Fall through to the general path: other members, backoff, deadline.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        last: StoreError | None = None
        backoff = 0.02
        while True:
            targets = [endpoint] if endpoint else self._order()
            for ep in targets:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    conn = await self._conn(ep)
                except UnavailableError as e:
                    if self._closed:
                        raise
                    last = e
                    continue
                try:
                    header, result = await conn.call(name, args, timeout=remaining)
                except NotLeaderError as e:
                    last = e
                    if endpoint is None:
                        self._learn_leader(e)
                    break  # retry from the top, leader first
                except StoreError as e:
                    if not may_retry(e, method.idempotent):
                        raise
                    last = e
                    continue
                if endpoint is None:
                    self._preferred = ep
                return header, result
            if loop.time() + backoff >= deadline:
                raise last or UnavailableError("no endpoint answered")
            await asyncio.sleep(backoff)
            # Capped low (etcd's client waits 25 ms between retries): during an election the
            # wait after the new leader appears is at most this, and a round costs a few
            # small frames per member.
            backoff = min(backoff * 2, MAX_BACKOFF)

    # ------------------------------------------------------------------ KV
    async def range(self, req: RangeRequest) -> RangeResponse:
        return (await self.call(M.RANGE, req))[1]

    async def get(
        self,
        key: bytes,
        range_end: bytes = b"",
        *,
        prefix: bool = False,
        revision: int = 0,
        limit: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
        serializable: bool = False,
        sort_order: SortOrder = SortOrder.NONE,
        sort_target: SortTarget = SortTarget.KEY,
    ) -> RangeResponse:
        if prefix:
            range_end = prefix_end(key)
        return await self.range(
            RangeRequest(
                key=key,
                range_end=range_end,
                limit=limit,
                revision=revision,
                sort_order=sort_order,
                sort_target=sort_target,
                serializable=serializable,
                keys_only=keys_only,
                count_only=count_only,
            )
        )

    async def put(
        self,
        key: bytes,
        value: bytes,
        *,
        lease: int = 0,
        prev_kv: bool = False,
        ignore_value: bool = False,
        ignore_lease: bool = False,
    ) -> PutResponse:
        req = PutRequest(key, value, lease, prev_kv, ignore_value, ignore_lease)
        return (await self.call(M.PUT, req))[1]

    async def delete(
        self, key: bytes, range_end: bytes = b"", *, prefix: bool = False, prev_kv: bool = False
    ) -> DeleteRangeResponse:
        if prefix:
            range_end = prefix_end(key)
        return (await self.call(M.DELETE_RANGE, DeleteRangeRequest(key, range_end, prev_kv)))[1]

    async def txn(self, req: TxnRequest) -> TxnResponse:
        return (await self.call(M.TXN, req))[1]

    async def compact(self, revision: int, physical: bool = False) -> CompactionResponse:
        return (await self.call(M.COMPACT, CompactionRequest(revision, physical)))[1]

    # ------------------------------------------------------------------ leases
    async def lease_grant(self, ttl: int, lease_id: int = 0) -> LeaseGrantResponse:
        return (await self.call(M.LEASE_GRANT, LeaseGrantRequest(ttl, lease_id)))[1]

    async def lease_revoke(self, lease_id: int) -> int:
        """Revoke the lease (and delete its keys); returns the revision after it."""
        return (await self.call(M.LEASE_REVOKE, LeaseIdRequest(lease_id)))[1].revision

    async def lease_keepalive(self, lease_id: int) -> LeaseKeepAliveResponse:
        return (await self.call(M.LEASE_KEEPALIVE, LeaseIdRequest(lease_id)))[1]

    async def lease_ttl(self, lease_id: int, keys: bool = False) -> LeaseTimeToLiveResponse:
        return (await self.call(M.LEASE_TTL, LeaseTimeToLiveRequest(lease_id, keys)))[1]

    async def leases(self) -> list[int]:
        return (await self.call(M.LEASE_LEASES, EMPTY))[1].ids

    # ------------------------------------------------------------------ cluster
    async def status(self, endpoint: str | None = None) -> StatusResponse:
        return (await self.call(M.STATUS, EMPTY, endpoint=endpoint))[1]

    async def members(self) -> list[MemberInfo]:
        return (await self.call(M.MEMBERS, EMPTY))[1].members

    async def member_add(self, name: str, peer_url: str, client_url: str, http_url: str, learner: bool) -> MemberInfo:
        return (await self.call(M.MEMBER_ADD, MemberAddRequest(name, peer_url, client_url, http_url, learner)))[1]

    async def member_remove(self, member_id: int) -> None:
        await self.call(M.MEMBER_REMOVE, MemberIdRequest(member_id))

    async def member_promote(self, member_id: int) -> None:
        await self.call(M.MEMBER_PROMOTE, MemberIdRequest(member_id))

    async def member_update(
        self, member_id: int, name: str, peer_url: str, client_url: str, http_url: str
    ) -> MemberInfo:
        return (await self.call(M.MEMBER_UPDATE, MemberUpdateRequest(member_id, name, peer_url, client_url, http_url)))[
            1
        ]

    async def move_leader(self, member_id: int) -> None:
        await self.call(M.MOVE_LEADER, MemberIdRequest(member_id))

    async def hash_kv(self, endpoint: str, revision: int = 0) -> tuple[int, int, int]:
        """(hash, compact_revision, revision) of one member's key space."""
        r = (await self.call(M.HASH_KV, HashKVRequest(revision), endpoint=endpoint))[1]
        return r.hash, r.compact_revision, r.revision

    async def snapshot(self, endpoint: str | None = None) -> tuple[Header, bytes]:
        """A consistent backup of one member's state (the leader's by default)."""
        ep = endpoint or self._order()[0]
        conn = await self._conn(ep)
        parts: list[bytes] = []
        done: asyncio.Future[Header] = asyncio.get_running_loop().create_future()

        def on_frame(kind: int, header: Header | None, payload: Any) -> None:
            if done.done():
                return
            if kind == ERROR:
                done.set_exception(payload)
                return
            try:
                parts.append(M.SNAPSHOT.decode_response(payload).data)
            except StoreError as e:
                done.set_exception(ProtocolError(f"malformed snapshot chunk: {e}"))
                return
            if kind == END:
                assert header is not None
                done.set_result(header)

        conn.open_stream(M.SNAPSHOT.name, EMPTY.to_wire(), on_frame)
        header = await asyncio.wait_for(done, max(self.timeout, 60.0))
        return header, b"".join(parts)

    # ------------------------------------------------------------------ watch
    def watch(
        self,
        key: bytes,
        range_end: bytes = b"",
        *,
        prefix: bool = False,
        start_revision: int = 0,
        prev_kv: bool = False,
        progress_notify: bool = False,
        filters: tuple[WatchFilter, ...] = (),
    ) -> Watch:
        if prefix:
            range_end = prefix_end(key)
        req = WatchCreateRequest(key, range_end, start_revision, progress_notify, list(filters), prev_kv)
        return Watch(self, req)


class Watch:
    """An async iterator of WatchResponses that survives member failures.

    After a connection loss it re-creates the watch on another member from the revision
    after the last one it delivered, so the stream stays ordered, without gaps or
    duplicates.  A compacted start ends the stream with a canceled response.
    """

    def __init__(self, client: Client, req: WatchCreateRequest) -> None:
        self.client = client
        self.req = req
        self.next_revision = req.start_revision
        """Where a re-created watch starts: one past the last revision delivered."""
        self._queue: asyncio.Queue[WatchResponse | StoreError] = asyncio.Queue()
        self._conn: Connection | None = None
        self._rid = 0
        self.watch_id = 0
        self._closed = False
        self.resumes = 0

    def __aiter__(self) -> AsyncIterator[WatchResponse]:
        return self._iterate()

    async def _open(self) -> None:
        client = self.client
        loop = asyncio.get_running_loop()
        deadline = loop.time() + client.timeout
        last: StoreError | None = None
        while loop.time() < deadline:
            for ep in client._order():
                try:
                    conn = await client._conn(ep)
                except UnavailableError as e:
                    if client._closed:
                        raise
                    last = e
                    continue
                req = WatchCreateRequest(
                    self.req.key,
                    self.req.range_end,
                    self.next_revision,
                    self.req.progress_notify,
                    self.req.filters,
                    self.req.prev_kv,
                )
                self._conn = conn
                # The id is the member's: unknown until this stream's created response (a stale
                # one could name another watch on this connection; 0 would name all of them).
                self.watch_id = 0
                self._rid = conn.open_stream(M.WATCH.name, req.to_wire(), self._on_frame)
                return
            await asyncio.sleep(0.05)
        raise last or UnavailableError("no member to watch on")

    def _on_frame(self, kind: int, header: Header | None, payload: Any) -> None:
        if kind == ERROR:
            self._queue.put_nowait(payload)
            return
        try:
            self._queue.put_nowait(WatchResponse.from_wire(payload))
        except Exception as e:  # a member sent garbage: treat it as a lost stream
            self._queue.put_nowait(ConnectionLost(f"malformed watch response: {type(e).__name__}"))

    async def _iterate(self) -> AsyncIterator[WatchResponse]:
        await self._open()
        try:
            while not self._closed:
                item = await self._queue.get()
                if isinstance(item, StoreError):
                    if not may_retry(item, M.WATCH.idempotent):
                        raise item
                    # The member went away: resume elsewhere from where we are.
                    self.resumes += 1
                    await asyncio.sleep(0.05)
                    await self._open()
                    continue
                resp = item
                if resp.created:
                    self.watch_id = resp.watch_id
                    if self.next_revision == 0:
                        self.next_revision = resp.revision + 1
                    if self.resumes:
                        continue  # the consumer saw the first creation already
                if resp.events:
                    self.next_revision = resp.events[-1].kv.mod_revision + 1
                elif resp.is_progress_notify:
                    self.next_revision = max(self.next_revision, resp.revision + 1)
                yield resp
                if resp.canceled:
                    return
        finally:
            await self.cancel()

    async def progress(self) -> None:
        """Ask for a progress notification (bookmark) on this watch's member; nothing before the
        watch is created there (the member answers only when it has delivered everything up to
        the revision it reports, so an unanswered request is simply asked again)."""
        if self._conn is not None and self.watch_id:
            with contextlib.suppress(StoreError):
                await self._conn.call(M.WATCH_PROGRESS.name, [self.watch_id], timeout=self.client.timeout)

    async def cancel(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._conn is not None and self._conn.is_open:
            self._conn.close_stream(self._rid)
            if not self.watch_id:
                return  # not created there yet: the member ends it when the stream's connection goes
            with contextlib.suppress(StoreError):
                await self._conn.call(M.WATCH_CANCEL.name, [self.watch_id], timeout=1.0)
