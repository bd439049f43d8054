"""gRPC over our HTTP/2 connection (machinery/http2.py): the calls of the etcd API.

A call is one HTTP/2 stream: request headers (`:method POST`, `:path /etcdserverpb.KV/Put`,
`content-type: application/grpc...`, maybe `grpc-timeout`), then length-prefixed messages
(1 byte "compressed", 4 bytes length, the protobuf bytes), answered by response headers,
messages and trailers carrying `grpc-status` and `grpc-message`.

Every edge is checked here, before a handler sees anything, with grpc-go's codes and words: an
unknown path is UNIMPLEMENTED, a grpc-encoding other than identity UNIMPLEMENTED (we offer
only identity) and a message flagged compressed anyway INTERNAL, a message over
`max_message_bytes` RESOURCE_EXHAUSTED (its bytes are dropped as they come, never buffered),
bytes that do not parse as the method's request message INVALID_ARGUMENT; a call past its
`grpc-timeout` ends DEADLINE_EXCEEDED.  Errors never reach the connection: one bad call ends
with its status and the others go on.

Handlers: a unary one gets (call, request) and answers with `call.reply(msg)` or
`call.fail(status)`, synchronously or later (the write hot path answers from the apply
loop's callback, with no task per request); a streaming one is an object made per call that
gets each message, the client's half-close and a cancel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from google.protobuf.message import DecodeError

from machinery.http2 import Http2Connection, Stream
from store.etcdapi.convert import (
    CANCELLED,
    DEADLINE_EXCEEDED,
    INTERNAL,
    INVALID_ARGUMENT,
    OK,
    RESOURCE_EXHAUSTED,
    UNIMPLEMENTED,
    GrpcStatus,
)
from store.etcdapi.messages import RpcMethod

log = logging.getLogger("raftkube.etcdapi")

RESPONSE_HEADERS = [(b":status", b"200"), (b"content-type", b"application/grpc")]
OK_TRAILERS = [(b"grpc-status", b"0")]
PARTIAL_LIMIT = 64 << 20
"""Bytes of unfinished request messages one connection may hold before their window is given
back only as each completes: what a connection's half-sent requests can cost at most
(beyond the 16 MiB connection window)."""
GRPC_OVERHEAD = 512 << 10
"""etcd's margin over --max-request-bytes for a gRPC message (its grpcOverheadBytes): the
largest request message a member takes, and the size past which a Watch that asked for
`fragment` gets a revision's events split over several responses."""
TIMEOUT_UNITS = {b"H": 3600.0, b"M": 60.0, b"S": 1.0, b"m": 1e-3, b"u": 1e-6, b"n": 1e-9}


def percent_encode(message: str) -> bytes:
    """grpc-message as the gRPC spec writes it: bytes outside printable ASCII, and '%', as %XX."""
    out = bytearray()
    for b in message.encode("utf-8"):
        if 0x20 <= b <= 0x7E and b != 0x25:
            out.append(b)
        else:
            out += b"%%%02X" % b
    return bytes(out)


def frame_message(data: bytes) -> bytes:
    """One message as gRPC frames it: uncompressed, length, bytes."""
    return b"\0" + len(data).to_bytes(4, "big") + data


def parse_timeout(value: bytes) -> float | None:
    """grpc-timeout (`100m`, `5S`: at most 8 digits and a unit) in seconds; None if malformed."""
    if not 2 <= len(value) <= 9 or not value[:-1].isdigit():
        return None
    unit = TIMEOUT_UNITS.get(value[-1:])
    return None if unit is None else int(value[:-1]) * unit


class StreamingHandler(Protocol):
    """One streaming call's server side (made per call by its factory)."""

    def message(self, msg: Any) -> None: ...

    def half_closed(self) -> None: ...

    def cancelled(self) -> None: ...


UnaryHandler = Callable[["Call", Any], None]
StreamingFactory = Callable[["Call"], StreamingHandler]


@dataclass(frozen=True, slots=True)
class Route:
    method: RpcMethod
    unary: UnaryHandler | None = None
    streaming: StreamingFactory | None = None


class Call:
    """The server side of one gRPC call."""

    __slots__ = (
        "_buf",
        "_credited",
        "_messages",
        "_need",
        "_skip",
        "_started",
        "_timer",
        "done",
        "handler",
        "max_message",
        "route",
        "stream",
    )

    def __init__(self, stream: Stream, route: Route, max_message: int) -> None:
        self.stream = stream
        self.route = route
        self.max_message = max_message
        self._buf = bytearray()
        self._credited = 0
        """Bytes of the message under way already given back to the client's windows."""
        self._need = -1
        """Bytes of the message under way (-1: between messages)."""
        self._skip = 0
        """Bytes of an oversized message still to be dropped."""
        self._messages = 0
        self._started = False
        self.done = False
        self._timer: asyncio.TimerHandle | None = None
        self.handler: StreamingHandler | None = None

    @property
    def peer(self) -> str:
        return self.stream.conn.peer

    def metadata(self, name: bytes) -> bytes | None:
        return self.stream.header(name)

    # ------------------------------------------------------------------ answering
    def _start(self) -> None:
        if not self._started:
            self._started = True
            self.stream.send_headers(RESPONSE_HEADERS)

    def send(self, msg: Any) -> None:
        """One response message of a streaming call."""
        self.send_encoded(frame_message(msg.SerializeToString()))

    def send_encoded(self, framed: bytes) -> None:
        """A response message already serialized and framed (watch responses: built from
        pieces shared between watchers)."""
        if self.done:
            return
        self._start()
        self.stream.send_data(framed)

    def reply(self, msg: Any) -> None:
        """The answer of a unary call, and its end."""
        if self.done:
            return
        self._start()
        self.stream.send_data(frame_message(msg.SerializeToString()))
        self.finish()

    def finish(self) -> None:
        if self.done:
            return
        self._start()
        self._end()
        self.stream.send_trailers(OK_TRAILERS)

    def fail(self, status: GrpcStatus) -> None:
        """End the call with `status`.  A streaming handler is told the call is over (`cancelled`),
        whatever ended it: a Watch call's watches must not outlive it."""
        if self.done:
            return
        trailers = [(b"grpc-status", str(status.code).encode()), (b"grpc-message", percent_encode(status.message))]
        self._end()
        if self._started:
            self.stream.send_trailers(trailers)
        else:  # trailers-only: one HEADERS frame
            self._started = True
            self.stream.send_headers(RESPONSE_HEADERS + trailers, end=True)
        if self.handler is not None:
            self.handler.cancelled()

    def reset(self, code: int, why: str) -> None:
        """End the call with RST_STREAM `code`, dropping what it still owes its client (one that
        does not read its answers), and tell a streaming handler."""
        if self.done:
            return
        log.warning("resetting %s from %s: %s", self.route.method.path, self.peer, why)
        self.stream.reset(code)
        self.cancelled()

    def _end(self) -> None:
        self.done = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._buf:  # a message begun and never finished: what it held is given back
            conn = self.stream.conn
            if self._need >= 0:
                conn.partial -= len(self._buf)
            conn.consumed(len(self._buf) - self._credited)
            self._buf = bytearray()
            self._credited = 0

    def backlog(self) -> int:
        """Bytes this call owes its client (queued for the flow-control window, and unsent on
        the connection)."""
        return self.stream.backlog()

    def abort(self) -> None:
        """Drop the whole connection now (a client that does not read: see watch_streams)."""
        self._end()
        self.stream.conn.abort()

    @property
    def closed(self) -> bool:
        return self.done or self.stream.closed or self.stream.conn.closed

    # ------------------------------------------------------------------ receiving
    def data(self, data: bytes, end: bool) -> None:
        view = memoryview(data)
        pos = 0
        conn = self.stream.conn
        while pos < len(view) and not self.done:
            if self._skip:
                n = min(self._skip, len(view) - pos)
                self._skip -= n
                pos += n
                conn.consumed(n, self.stream)
                continue
            if self._need < 0:
                want = 5 - len(self._buf)
                self._buf += view[pos : pos + want]
                pos += min(want, len(view) - pos)
                if len(self._buf) < 5:
                    break
                compressed, length = self._buf[0], int.from_bytes(self._buf[1:5], "big")
                conn.consumed(5, self.stream)
                self._buf.clear()
                if length > self.max_message:  # grpc-go looks at the length first
                    self._skip = length
                    self.fail(
                        GrpcStatus(
                            RESOURCE_EXHAUSTED,
                            f"grpc: received message larger than max ({length} vs. {self.max_message})",
                        )
                    )
                    break
                if compressed:  # only identity is ever negotiated here
                    self._skip = length
                    self.fail(
                        GrpcStatus(INTERNAL, "grpc: compressed flag set with identity or empty encoding")
                        if compressed == 1
                        else GrpcStatus(INTERNAL, f"grpc: received unexpected payload format {compressed}")
                    )
                    break
                self._need = length
            take = min(self._need - len(self._buf), len(view) - pos)
            self._buf += view[pos : pos + take]
            pos += take
            if len(self._buf) == self._need:
                body = bytes(self._buf)
                self._buf.clear()
                self._need = -1
                conn.partial -= len(body) - take
                conn.consumed(len(body) - self._credited, self.stream)
                self._credited = 0
                self._message(body)
            elif take:
                # a message still arriving: its bytes are given back to the windows as they come,
                # while the connection holds less than PARTIAL_LIMIT of unfinished messages —
                # else a client writing big messages on many streams at once (grpc-go does, in
                # 16 KiB frames round-robin) would fill the window with halves and wait forever
                conn.partial += take
                if conn.partial <= PARTIAL_LIMIT:
                    conn.consumed(take, self.stream)
                    self._credited += take
        if pos < len(view):
            conn.consumed(len(view) - pos, self.stream)  # after a failure: dropped, window given back
        if end and not self.done:
            if self._need >= 0 or self._buf:
                self.fail(GrpcStatus(INTERNAL, "grpc: the request ended inside a message"))
            elif self.handler is not None:
                self.handler.half_closed()
            elif self._messages == 0:
                self.fail(GrpcStatus(INTERNAL, "grpc: a unary call without its request message"))

    def _message(self, body: bytes) -> None:
        self._messages += 1
        route = self.route
        try:
            msg = route.method.request.FromString(body)
        except DecodeError as e:
            self.fail(GrpcStatus(INVALID_ARGUMENT, f"grpc: error unmarshalling request: {e}"))
            return
        try:
            if route.unary is not None:
                if self._messages > 1:
                    self.fail(GrpcStatus(INTERNAL, "grpc: a unary call with more than one request message"))
                    return
                route.unary(self, msg)
            elif self.handler is not None:
                self.handler.message(msg)
        except GrpcStatus as s:
            self.fail(s)
        except Exception as e:  # a bug: this call fails, the member goes on
            log.exception("internal error serving %s", route.method.path)
            self.fail(GrpcStatus(INTERNAL, f"etcdserver: internal error: {type(e).__name__}: {e}"))

    def cancelled(self) -> None:
        if self.done:
            return
        self._end()
        if self.handler is not None:
            self.handler.cancelled()


class GrpcHandler:
    """The HTTP/2 handler of one connection: streams become calls."""

    def __init__(self, conn: Http2Connection, routes: dict[bytes, Route], max_message: int) -> None:
        self.conn = conn
        self.routes = routes
        self.max_message = max_message

    def on_headers(self, stream: Stream) -> None:
        path = stream.header(b":path") or b""
        route = self.routes.get(path)
        if stream.header(b":method") != b"POST" or not (stream.header(b"content-type") or b"").startswith(
            b"application/grpc"
        ):
            stream.send_headers([(b":status", b"415"), (b"content-type", b"text/plain")], end=False)
            stream.send_trailers([])
            return
        if route is None:
            call = Call(stream, Route(_unknown_method()), self.max_message)
            stream.app = call
            call.fail(GrpcStatus(UNIMPLEMENTED, self._unknown(path)))
            return
        call = Call(stream, route, self.max_message)
        stream.app = call
        encoding = stream.header(b"grpc-encoding")
        if encoding not in (None, b"identity"):
            call.fail(
                GrpcStatus(UNIMPLEMENTED, f"grpc: Decompressor is not installed for grpc-encoding {_quote(encoding)}")
            )
            return
        timeout = stream.header(b"grpc-timeout")
        if timeout is not None:
            seconds = parse_timeout(timeout)
            if seconds is None:
                call.fail(GrpcStatus(INTERNAL, f"malformed grpc-timeout: {_quote(timeout)}"))
                return
            call._timer = asyncio.get_running_loop().call_later(seconds, _deadline, call)
        if route.streaming is not None:
            call.handler = route.streaming(call)

    def _unknown(self, path: bytes) -> str:
        """grpc-go's words for a path no route serves."""
        name = path.decode("latin-1")
        service, slash, method = name.removeprefix("/").rpartition("/")
        if not slash:
            return f"malformed method name: {_quote(path)}"
        if not any(known.startswith(f"/{service}/".encode("latin-1")) for known in self.routes):
            return f"unknown service {service[:200]}"
        return f"unknown method {method[:200]} for service {service}"

    def on_data(self, stream: Stream, data: bytes, end: bool) -> None:
        call = stream.app
        if isinstance(call, Call):
            call.data(data, end)
        else:
            stream.conn.consumed(len(data), stream)

    def on_reset(self, stream: Stream) -> None:
        call = stream.app
        if isinstance(call, Call):
            call.cancelled()


def _deadline(call: Call) -> None:
    call.fail(GrpcStatus(DEADLINE_EXCEEDED, "context deadline exceeded"))  # a streaming handler is told


def _quote(value: bytes) -> str:
    """A header value as Go's %q shows it (near enough: quoted, escapes, at most 200 bytes)."""
    return '"' + value[:200].decode("latin-1").encode("unicode_escape").decode().replace('"', '\\"') + '"'


def _unknown_method() -> RpcMethod:
    return RpcMethod("?", "?", None, None, False, False)


__all__ = ["CANCELLED", "OK", "Call", "GrpcHandler", "GrpcStatus", "Route", "StreamingHandler"]
