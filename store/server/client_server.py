"""The client port: accepting connections, reading request frames, answering them.

Every request is decoded by its method's typed request class (store/api/methods.py) before
anything else looks at it: a wrong field gets `invalid-argument` naming the field, an
unknown method `invalid-argument`, an oversized request `request-too-large` (its body is
skipped, never buffered), and the connection goes on.  Only bytes that are not frames at
all, or a first frame that is not a hello, close the connection (with an error frame).

What one client can cost is bounded: connections beyond `max_connections` (never more than
the file descriptors the member can spare) are closed at once; a connection that sends no
hello within `hello_timeout` is closed, and so is one that, after its hello, starts a frame
and does not finish it within `frame_timeout` (between frames a connection may idle: watches
and lease keepalives do); at most `MAX_INFLIGHT` requests run per connection, and a
connection whose unsent answers pile up is not read from until its client takes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from machinery.http2 import Http2Connection
from store.api import errors as E
from store.api import methods as M
from store.api.framing import FrameReader, Oversized, encode_frame
from store.api.protocol import END, ERROR, OK, PROTOCOL, STREAM
from store.etcdapi.grpc import GRPC_OVERHEAD, GrpcHandler
from store.server import memory
from store.server.client_conn import ClientConn, limit_tls_buffers
from store.server.cluster_service import ClusterService
from store.server.kv_service import KVService, WriteRequest
from store.server.lease_service import LeaseService
from store.server.watch_streams import WatchStreams

if TYPE_CHECKING:
    from store.etcdapi.grpc import Route

log = logging.getLogger("raftkube.clients")

MAX_INFLIGHT = 1024
"""Requests of one connection being served at once; reading waits while it is reached."""
RESPONSE_PAUSE = 4 << 20
"""Unsent bytes on a connection above which no more of its requests are read until it reads."""
SNAPSHOT_CHUNK = 1 << 20
RELEASE_AFTER = 1 << 20
"""Unsent bytes of a closing connection above which the heap is trimmed after it (memory.py),
as it is after one that held watches (its watchers' buffers go with it)."""

H2_SNIFF = b"PRI "
"""The first bytes of HTTP/2's connection preface (as a frame length of ours: 1.3 GB, never one)."""

Handler = Callable[[Any], Awaitable[Any]]


class ClientServer:
    def __init__(
        self,
        kv: KVService,
        leases: LeaseService,
        cluster: ClusterService,
        watches: WatchStreams,
        header: Callable[[], list[int]],
        max_request_bytes: int,
        max_connections: int,
        hello_timeout: float,
        frame_timeout: float,
        ssl_context: ssl.SSLContext | None = None,
        etcd_routes: dict[bytes, Route] | None = None,
    ) -> None:
        self.kv = kv
        self.watches = watches
        self.cluster = cluster
        self.header = header
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.hello_timeout = hello_timeout
        self.frame_timeout = frame_timeout
        self.ssl_context = ssl_context
        self.server: asyncio.Server | None = None
        self.conns: set[ClientConn] = set()
        self._accepted = 0
        self.refused_connections = 0
        self._handlers: dict[str, Handler] = {
            M.RANGE.name: kv.range,
            M.COMPACT.name: kv.compact,
            M.HASH_KV.name: kv.hash_kv,
            M.LEASE_GRANT.name: leases.grant,
            M.LEASE_REVOKE.name: leases.revoke,
            M.LEASE_KEEPALIVE.name: leases.keepalive,
            M.LEASE_TTL.name: leases.time_to_live,
            M.LEASE_LEASES.name: leases.leases,
            M.STATUS.name: cluster.status,
            M.MEMBERS.name: cluster.members,
            M.MEMBER_ADD.name: cluster.member_add,
            M.MEMBER_REMOVE.name: cluster.member_remove,
            M.MEMBER_PROMOTE.name: cluster.member_promote,
            M.MEMBER_UPDATE.name: cluster.member_update,
            M.MOVE_LEADER.name: cluster.move_leader,
        }
        self._fast = {M.PUT.name, M.DELETE_RANGE.name, M.TXN.name}
        self.etcd_routes = etcd_routes
        """The etcd API's calls (store/etcdapi), served on this same port to connections that
        speak HTTP/2: by ALPN "h2" under TLS, by the HTTP/2 preface without."""
        self.etcd_conns: set[Http2Connection] = set()

    async def listen(self, host: str, port: int) -> None:
        # TLS is started by hand after accepting, so that a connection counts against the
        # limit from its first moment, handshake included.
        self.server = await asyncio.start_server(self._accept, host, port, reuse_address=True)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for c in list(self.conns):
            c.abort()
        for h in list(self.etcd_conns):
            h.abort()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1.0)

    # ------------------------------------------------------------------ connections
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Counted from accept, hello or not: idle sockets cost descriptors just the same.
        if self._accepted >= self.max_connections:
            self.refused_connections += 1
            err = E.UnavailableError(f"too many client connections (limit {self.max_connections}); try another member")
            with contextlib.suppress(Exception):
                writer.write(encode_frame([0, ERROR, err.to_wire()]))
                writer.close()
            return
        self._accepted += 1
        raw = writer.transport
        try:
            if self.ssl_context is not None:
                try:
                    await writer.start_tls(self.ssl_context, ssl_handshake_timeout=self.hello_timeout)
                except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as e:
                    log.info("client TLS handshake from %s failed: %s", writer.get_extra_info("peername"), e)
                    writer.transport.abort()
                    return
                limit_tls_buffers(raw, writer.transport)
                tls = writer.get_extra_info("ssl_object")
                if self.etcd_routes is not None and tls is not None and tls.selected_alpn_protocol() == "h2":
                    await self._serve_etcd(reader, writer, b"")
                    return
                await self._serve(reader, writer, raw)
                return
            # without TLS the first bytes tell: HTTP/2's preface starts "PRI ", never a frame of ours
            try:
                first = await asyncio.wait_for(reader.readexactly(len(H2_SNIFF)), self.hello_timeout)
            except (TimeoutError, asyncio.IncompleteReadError, OSError, ConnectionError):
                writer.transport.abort()
                return
            if self.etcd_routes is not None and first == H2_SNIFF:
                await self._serve_etcd(reader, writer, first)
                return
            await self._serve(reader, writer, None, first)
        finally:
            self._accepted -= 1

    async def _serve_etcd(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes) -> None:
        """Hand the connection to the etcd API: the transport gets an HTTP/2 protocol, which is
        fed what the stream reader had already taken in; returns once the connection closes."""
        assert self.etcd_routes is not None
        routes = self.etcd_routes
        limit = self.max_request_bytes + GRPC_OVERHEAD
        closed = asyncio.get_running_loop().create_future()

        def gone(conn: Http2Connection) -> None:
            self.etcd_conns.discard(conn)
            if not closed.done():
                closed.set_result(None)

        h2 = Http2Connection(lambda c: GrpcHandler(c, routes, limit), gone, frame_timeout=self.frame_timeout)
        self.etcd_conns.add(h2)
        transport = writer.transport
        taken = first + _take_buffered(reader)
        transport.set_protocol(h2)
        h2.connection_made(transport)
        if taken:
            h2.data_received(taken)
        await closed

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        raw: asyncio.WriteTransport | None,
        sniffed: bytes = b"",
    ) -> None:
        conn = ClientConn(writer, raw)
        frames = FrameReader(
            reader, max_frame=self.max_request_bytes, skip_oversized=True, frame_timeout=self.frame_timeout
        )
        frames.buf += sniffed  # bytes read to tell the protocol apart
        tasks: set[asyncio.Task[None]] = set()
        try:
            try:
                first = await asyncio.wait_for(frames.sized_frames(), self.hello_timeout)
            except TimeoutError:
                raise E.ProtocolError(f"no hello within {self.hello_timeout:.1f}s") from None
            if not first or not _is_hello(first[0][0]):
                raise E.ProtocolError("the first frame must be a hello")
            self.conns.add(conn)
            pending = first
            while True:
                for f, size in pending:
                    self._request(conn, f, size, tasks)
                if len(tasks) >= MAX_INFLIGHT:
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                if conn.backlog() > RESPONSE_PAUSE:
                    await writer.drain()  # the client is not reading its answers: neither do we
                pending = await frames.sized_frames()
                if not pending:
                    return
        except E.ProtocolError as e:
            log.info("closing client connection: %s", e)
            with contextlib.suppress(Exception):
                writer.write(encode_frame([0, ERROR, e.to_wire()]))
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self.conns.discard(conn)
            watched = bool(conn.watches)
            owed = max(self.watches.drop(conn), conn.backlog())
            for t in tasks:
                t.cancel()
            conn.close()
            if watched or owed > RELEASE_AFTER:
                memory.release_soon()  # what it owed is freed once its transport goes

    def _request(self, conn: ClientConn, f: Any, size: int, tasks: set[asyncio.Task[None]]) -> None:
        """Start serving one frame: the hot writes inline, everything else as a task."""
        if isinstance(f, Oversized):
            if f.request_id is None:
                raise E.ProtocolError(f"a frame of {f.size} bytes that is not a request")
            self._reply_error(conn, f.request_id, self._too_large(f.size))
            return
        if type(f) is not list or len(f) != 3 or type(f[0]) is not int:
            raise E.ProtocolError("a request frame must be [id, method, args]")
        rid, name, args = f
        if type(name) is str and name in self._fast:
            self._fast_write(conn, rid, name, args)
            return
        t = asyncio.get_running_loop().create_task(self._handle(conn, rid, name, args))
        tasks.add(t)
        t.add_done_callback(tasks.discard)

    def _too_large(self, size: int) -> E.StoreError:
        return E.RequestTooLargeError(f"request is too large: {size} bytes, the limit is {self.max_request_bytes}")

    def _reply(self, conn: ClientConn, rid: int, result: Any) -> None:
        conn.send(encode_frame([rid, OK, self.header(), result]))

    def _reply_error(self, conn: ClientConn, rid: int, err: E.StoreError) -> None:
        conn.send(encode_frame([rid, ERROR, err.to_wire()]))

    def _fast_write(self, conn: ClientConn, rid: int, name: str, args: Any) -> None:
        """Put, delete and txn: decoded, checked and proposed right here, answered by the
        apply loop writing the reply frame (no coroutine per request)."""

        def done(result: Any) -> None:
            if conn.closed:
                return
            if isinstance(result, E.StoreError):
                self._reply_error(conn, rid, result)
            else:
                self._reply(conn, rid, result)

        try:
            req: WriteRequest = M.METHODS[name].decode_request(args)
            self.kv.write(req, done)
        except E.StoreError as e:
            done(e)

    async def _handle(self, conn: ClientConn, rid: int, name: Any, args: Any) -> None:
        try:
            method = M.METHODS.get(name) if type(name) is str else None
            if method is None:
                raise E.InvalidArgumentError(f"unknown method {str(name)[:64]!r}", field="method")
            req = method.decode_request(args)
            if method is M.WATCH:
                self.watches.create(conn, rid, req)
                return
            if method is M.SNAPSHOT:
                await self._send_snapshot(conn, rid)
                return
            if method is M.WATCH_CANCEL:
                self.watches.cancel(conn, req.watch_id)
                self._reply(conn, rid, None)
                return
            if method is M.WATCH_PROGRESS:
                self.watches.progress(conn, req.watch_id)
                self._reply(conn, rid, None)
                return
            if method is M.HELLO:
                self._reply(conn, rid, PROTOCOL)
                return
            resp = await self._handlers[method.name](req)
            self._reply(conn, rid, resp.to_wire())
        except E.StoreError as e:
            self._reply_error(conn, rid, e)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug: report it, keep serving
            log.exception("internal error serving %r", name)
            self._reply_error(conn, rid, E.StoreError(f"internal error: {type(e).__name__}: {e}"))

    async def _send_snapshot(self, conn: ClientConn, rid: int) -> None:
        data = await self.cluster.backup()
        header = self.header()
        for off in range(0, max(len(data), 1), SNAPSHOT_CHUNK):
            kind = END if off + SNAPSHOT_CHUNK >= len(data) else STREAM
            conn.send(encode_frame([rid, kind, header, data[off : off + SNAPSHOT_CHUNK]]))
            await conn.writer.drain()


def _take_buffered(reader: asyncio.StreamReader) -> bytes:
    """What the stream reader has received and nobody read yet (asyncio has no public way to
    take it back; `_buffer` is its bytearray in every CPython 3.x)."""
    buffered = getattr(reader, "_buffer", None)
    if not isinstance(buffered, bytearray):
        return b""
    taken = bytes(buffered)
    buffered.clear()
    return taken


def _is_hello(f: Any) -> bool:
    return type(f) is list and len(f) == 3 and f[1] == M.HELLO.name and f[2] == [PROTOCOL]
