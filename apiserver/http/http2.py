"""HTTP/2 for the apiserver: one TLS connection carrying many requests and watches.

client-go and kubectl offer `h2` in the TLS handshake (ALPN) and kube-apiserver takes it: an
informer's LIST and WATCH, and every other call of a process, share one connection.  Uvicorn
speaks HTTP/1.1 only, so `negotiating` wraps its protocol: a connection whose handshake chose
`h2` is handed to an `ApiHttp2Connection`, which runs each stream as an ASGI `http` request
of the same app; every other connection stays with uvicorn.  Clients that upgrade (WebSocket
and SPDY for exec, attach and port-forward) offer `http/1.1` only, as they must with Go's
server too.

The frames, HPACK, flow control and their limits are the shared machinery's (machinery/http2.py,
which the etcd API's gRPC runs on too), set to kube-apiserver's values (k8s.io/apiserver's
secure serving): 250 streams per connection, 256 KiB per-stream upload window and frame size.
This module is the ASGI side, and what uvicorn's HTTP/1.1 protocol gives the apiserver besides
(apiserver.http.connection_limits), so that nothing a client sends grows memory or holds a
slot without bound:

- a request body is buffered only up to its stream's window: the window is given back as the
  app reads the body, so a client cannot send faster than the app takes it in; the
  connection's window (`API_LIMITS.recv_window`) bounds the sum over its streams;
- a response waits for the client's windows and for the socket's buffer to drain (its sender
  awaits `Stream.drained`), so an unread watch holds one message, not a growing queue;
- at most `max_streams` handlers run per connection, counting those still finishing after
  the client reset their stream (machinery/http2.py refuses the rest: "rapid reset");
- time: a begun frame must be complete within the header timeout; the first request is due
  within the header timeout of the handshake, as on HTTP/1.1; a request's body within the
  body timeout of its headers, else its stream is reset; a connection with no request open
  for the idle timeout gets GOAWAY and is closed;
- connections count towards the apiserver's ceiling (`max_connections`) as HTTP/1.1 ones do.

A malformed request (missing, empty or repeated pseudo-headers, a method that is not a token,
a path not starting with `/`, upper-case or connection-specific header names: RFC 9113
§8.2-8.3) is reset with PROTOCOL_ERROR before the app sees it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from typing import Any
from urllib.parse import unquote

from apiserver.http.connection_limits import ConnectionLimits, note_refused
from apiserver.tls_scope import tls_extension
from machinery.http2 import (
    INTERNAL_ERROR,
    NO_ERROR,
    PROTOCOL_ERROR,
    REFUSED_STREAM,
    Http2Connection,
    Http2Limits,
    Stream,
)

log = logging.getLogger("raftkube.apiserver.http2")

ALPN_PROTOCOLS = ("h2", "http/1.1")
"""What the apiserver offers in the TLS handshake, preferred first (set on its SSLContext)."""

MAX_STREAMS = 250
"""Concurrent streams per connection: kube's default for --http2-max-streams-per-connection."""
API_LIMITS = Http2Limits(
    max_streams=MAX_STREAMS,
    # kube's MaxUploadBufferPerStream and MaxReadFrameSize: the 99th percentile of resource
    # bodies, so most POSTs arrive in one window and one frame
    stream_window=256 * 1024,
    max_frame=256 * 1024,
    # kube allows 256 KiB x 250 streams (64 MiB) per connection; 4 MiB still lets 16 streams
    # upload a full window at once, and the connection ceiling times it stays within memory
    recv_window=4 * 1024 * 1024,
)

_PSEUDO = frozenset({b":method", b":scheme", b":authority", b":path"})
# connection-level headers have no meaning in HTTP/2 (RFC 9113 §8.2.2): a request with one is
# malformed, and a response drops them (uvicorn's `transfer-encoding`, for one)
_CONNECTION_HEADERS = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"})
_UPPER = bytes(range(ord("A"), ord("Z") + 1))
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A method is an RFC 9110 token."""


class _Request:
    """One stream's request and response, as its connection and its ASGI task share them."""

    __slots__ = (
        "body",
        "body_complete",
        "body_timer",
        "disconnected",
        "end_delivered",
        "headers",
        "headers_sent",
        "readable",
        "response_complete",
        "response_started",
        "status",
        "stream",
    )

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.body: deque[bytes] = deque()
        """Body chunks received and not yet read by the app (their window not yet given back)."""
        self.body_complete = False
        self.end_delivered = False
        self.disconnected = False
        """The stream was reset (by either side) or the connection is gone."""
        self.response_started = False
        self.response_complete = False
        self.status = 200
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_sent = False
        self.readable = asyncio.Event()
        self.body_timer: asyncio.TimerHandle | None = None

    def stop_body_timer(self) -> None:
        if self.body_timer is not None:
            self.body_timer.cancel()
            self.body_timer = None


class ApiHttp2Connection(Http2Connection):
    """An HTTP/2 connection of the apiserver: machinery/http2.py's, its streams run as ASGI
    requests of uvicorn's loaded app.  Towards uvicorn's server it plays the part of uvicorn's
    own protocols: counted in `server_state.connections` (the ceiling, graceful shutdown's
    wait), its handlers in `server_state.tasks`, and `shutdown()` closes it gracefully."""

    def __init__(self, uvicorn_protocol: Any, limits: ConnectionLimits, http2: Http2Limits) -> None:
        self.app = uvicorn_protocol.config.loaded_app
        self.server_state = uvicorn_protocol.server_state
        self.app_state: dict[str, Any] = uvicorn_protocol.app_state
        self.loop: asyncio.AbstractEventLoop = uvicorn_protocol.loop
        self.edge = limits
        self.closing = False
        self.scope_base: dict[str, Any] = {}
        self._idle_timer: asyncio.TimerHandle | None = None
        super().__init__(_AsgiStreams, lambda _conn: None, frame_timeout=limits.header_timeout, limits=http2)

    # ------------------------------------------------------------------ asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.server_state.connections.add(self)
        super().connection_made(transport)
        if len(self.server_state.connections) > self.edge.max_connections:
            note_refused(self.edge.max_connections)
            self.abort()
            return
        tls = tls_extension(transport)
        self.scope_base = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},  # as uvicorn's: a disconnect comes by receive
            "http_version": "2",
            "server": _address(transport.get_extra_info("sockname")),
            "client": _address(transport.get_extra_info("peername")),
            "root_path": "",
            **({"extensions": {"tls": tls}} if tls is not None else {}),
        }
        self.arm_idle(self.edge.header_timeout)  # the first request is due as on HTTP/1.1

    def connection_lost(self, exc: Exception | None) -> None:
        self.server_state.connections.discard(self)
        self.disarm_idle()
        super().connection_lost(exc)

    # ------------------------------------------------------------------ uvicorn's server
    def shutdown(self) -> None:
        """Graceful close: new streams are refused (REFUSED_STREAM: a client retries them on
        another connection), those running finish, then GOAWAY and close."""
        self.closing = True
        if self.working == 0:
            self.goaway(NO_ERROR, "the apiserver is shutting down")

    # ------------------------------------------------------------------ idle
    def arm_idle(self, seconds: float) -> None:
        self.disarm_idle()
        if not self.closed:
            self._idle_timer = self.loop.call_later(seconds, self._idle)

    def disarm_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle(self) -> None:
        self._idle_timer = None
        if self.working == 0:
            self.goaway(NO_ERROR, "idle")


class _AsgiStreams:
    """machinery/http2.py's Handler: each stream an ASGI request, in a task of its own."""

    def __init__(self, conn: Http2Connection) -> None:
        assert isinstance(conn, ApiHttp2Connection)
        self.conn = conn

    def on_headers(self, stream: Stream) -> None:
        conn = self.conn
        if conn.closing:
            stream.reset(REFUSED_STREAM)
            return
        scope = _scope(conn, stream.headers)
        if scope is None:
            stream.reset(PROTOCOL_ERROR)
            return
        request = _Request(stream)
        stream.app = request
        conn.working += 1
        conn.disarm_idle()
        if not stream.remote_closed:
            request.body_timer = conn.loop.call_later(conn.edge.body_timeout, self._body_timed_out, request)
        task = conn.loop.create_task(self._run(request, scope))
        conn.server_state.tasks.add(task)
        task.add_done_callback(conn.server_state.tasks.discard)
        conn.server_state.total_requests += 1

    def on_data(self, stream: Stream, data: bytes, end: bool) -> None:
        request = stream.app
        if not isinstance(request, _Request) or request.end_delivered or request.disconnected:
            stream.conn.consumed(len(data), stream)  # nobody will read it: its window goes back now
            return
        if data:
            request.body.append(data)
        if end:
            request.body_complete = True
            request.stop_body_timer()
        request.readable.set()

    def on_reset(self, stream: Stream) -> None:
        request = stream.app
        if isinstance(request, _Request):
            request.disconnected = True
            request.stop_body_timer()
            request.readable.set()

    def _body_timed_out(self, request: _Request) -> None:
        request.body_timer = None
        log.info("reset a stream from %s: its request body was not received in time", self.conn.peer)
        request.stream.reset()
        self.on_reset(request.stream)

    # ------------------------------------------------------------------ one request, in its task
    async def _run(self, request: _Request, scope: dict[str, Any]) -> None:
        """The app on one stream; a failure before any answer is a 500, after it a reset, as
        uvicorn treats an HTTP/1.1 request."""

        async def receive() -> dict[str, Any]:
            return await self._receive(request)

        async def send(message: dict[str, Any]) -> None:
            await self._send(request, message)

        conn = self.conn
        try:
            try:
                await conn.app(scope, receive, send)
            except Exception:
                log.exception("the app failed on an HTTP/2 request from %s", conn.peer)
            if not request.headers_sent:  # nothing answered yet (a start alone is not on the wire)
                request.response_started = True
                request.status, request.headers = 500, [(b"content-type", b"text/plain; charset=utf-8")]
                await self._body(request, b"Internal Server Error", more=False)
        finally:
            self._finish(request)

    async def _receive(self, request: _Request) -> dict[str, Any]:
        while True:
            if request.disconnected or (request.response_complete and request.end_delivered):
                return {"type": "http.disconnect"}
            if request.body:
                data = request.body.popleft()
                request.stream.conn.consumed(len(data), request.stream)
                more = bool(request.body) or not request.body_complete
                request.end_delivered = not more
                return {"type": "http.request", "body": data, "more_body": more}
            if request.body_complete and not request.end_delivered:
                request.end_delivered = True
                return {"type": "http.request", "body": b"", "more_body": False}
            request.readable.clear()
            await request.readable.wait()

    async def _send(self, request: _Request, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if request.response_started:
                raise RuntimeError("http.response.start sent twice")
            request.response_started = True
            request.status = int(message["status"])
            request.headers = [
                (name, bytes(value))
                for name, value in ((bytes(n).lower(), v) for n, v in message.get("headers", ()))
                if name not in _CONNECTION_HEADERS
            ]
            # on the wire now, as uvicorn writes them: a watch's client sees its 200 before any event
            self._headers(request, end=False)
        elif kind == "http.response.body":
            if not request.response_started:
                raise RuntimeError("http.response.body before http.response.start")
            if request.response_complete:
                raise RuntimeError("http.response.body after the response's end")
            await self._body(request, bytes(message.get("body", b"")), bool(message.get("more_body", False)))
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} on an HTTP/2 stream")

    async def _body(self, request: _Request, body: bytes, more: bool) -> None:
        """The headers (before the first body) and `body`; waits until the client's windows
        and the socket have taken it.  A disconnected stream drops it, as uvicorn does."""
        stream = request.stream
        if not more:
            request.response_complete = True
            request.readable.set()  # a receive waiting for the disconnect returns now
        if request.disconnected:
            return
        if not request.headers_sent:  # the 500 of a failed app
            self._headers(request, end=not more and not body)
        stream.send_data(body, end=not more)
        await stream.drained()

    def _headers(self, request: _Request, end: bool) -> None:
        if request.disconnected:
            return
        request.headers_sent = True
        headers = [
            (b":status", str(request.status).encode()),
            *self.conn.server_state.default_headers,
            *request.headers,
        ]
        request.stream.send_headers(headers, end=end)

    def _finish(self, request: _Request) -> None:
        """The handler is done: a response it left unfinished is reset, the window its unread
        body held is given back, and the connection may idle (or close, if shutting down)."""
        conn, stream = self.conn, request.stream
        request.stop_body_timer()
        if not request.response_complete and not stream.closed:
            stream.reset(INTERNAL_ERROR)
        while request.body:
            conn.consumed(len(request.body.popleft()), stream)
        request.disconnected = True
        conn.working -= 1
        if conn.working == 0:
            if conn.closing:
                conn.goaway(NO_ERROR, "the apiserver is shutting down")
            else:
                conn.arm_idle(conn.edge.idle_timeout)


def _scope(conn: ApiHttp2Connection, headers: list[tuple[bytes, bytes]]) -> dict[str, Any] | None:
    """The ASGI scope of a request's headers; None when they are malformed (RFC 9113 §8.3)."""
    pseudo: dict[bytes, bytes] = {}
    plain: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        if name.startswith(b":"):
            if plain or name not in _PSEUDO or name in pseudo:
                return None
            pseudo[name] = value
        elif (
            name in _CONNECTION_HEADERS
            or name.translate(None, _UPPER) != name
            or (name == b"te" and value != b"trailers")
        ):
            return None
        else:
            plain.append((name, value))
    method, path, scheme = pseudo.get(b":method", b""), pseudo.get(b":path", b""), pseudo.get(b":scheme")
    if not _TOKEN.fullmatch(method) or method == b"CONNECT" or scheme not in (b"https", b"http"):
        return None
    if not (path.startswith(b"/") or (path == b"*" and method == b"OPTIONS")):
        return None
    if b":authority" in pseudo and not any(name == b"host" for name, _ in plain):
        plain.insert(0, (b"host", pseudo[b":authority"]))
    raw_path, _, query = path.partition(b"?")
    return {
        **conn.scope_base,
        "scheme": scheme.decode("latin-1"),
        "method": method.decode("latin-1"),
        "path": unquote(raw_path.decode("latin-1")),
        "raw_path": raw_path,
        "query_string": query,
        "headers": plain,
        "state": conn.app_state.copy(),
    }


def _address(value: object) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None


def negotiating(base: type[asyncio.Protocol], limits: ConnectionLimits, http2: Http2Limits) -> type[asyncio.Protocol]:
    """`base` (uvicorn's HTTP/1.1 protocol, guarded), handing each connection whose TLS
    handshake chose `h2` to an `ApiHttp2Connection`: pass it as uvicorn's `http=`."""
    proto: Any = base  # uvicorn's protocol attributes (config, server_state, app_state, loop) are untyped

    class Negotiating(proto):  # type: ignore[misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            ssl_object = transport.get_extra_info("ssl_object")
            if ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2":
                connection = ApiHttp2Connection(self, limits, http2)
                transport.set_protocol(connection)
                connection.connection_made(transport)
                return
            super().connection_made(transport)

    Negotiating.__name__ = Negotiating.__qualname__ = f"Negotiating{base.__name__}"
    return Negotiating
