"""The server side of HTTP/2 (RFC 9113), on an asyncio Protocol: the etcd API's gRPC
(store/etcdapi/grpc.py) and the apiserver's HTTP/2 (apiserver/http/http2.py) run on it.

Why our own and not grpcio's server (nor the `h2` package, for the apiserver: one HTTP/2
implementation, already fuzzed and bounded, serves both): a member's event loop runs Raft, the apply loop and
the watch hub; grpc.aio's C core hands messages over one await at a time from its own
threads, and the apiserver measured its etcd watch messages arriving seconds late behind a
busy loop (apiserver/storage/h2grpc.py).  Here every read of the socket is parsed at once,
the frames of a loop turn's answers leave in one write, and the bytes owed to each client
are counted where the watch machinery can see them (`Stream.backlog`), so a client that
stops reading is paused and cut off as on our own protocol (store/server/watch_streams.py).

What is here: the connection preface and SETTINGS both ways, HEADERS (+ CONTINUATION)
decoded with HPACK, DATA with flow control both ways (a stream's output waits for the peer's
window, never overruns it), PING answers, RST_STREAM, WINDOW_UPDATE, GOAWAY.  No server
push, no priorities (PRIORITY frames are read and ignored).  Everything a peer sends is
bounded: header blocks (HPACK's header list limit, and CONTINUATION floods by size), the
streams open at once (REFUSED_STREAM beyond), what a stream may have buffered, and the
connection's receive window, which is given back only as requests are handed on.

The application sees `Stream`s: `Handler.on_headers(stream)` once its request headers are
in, then `on_data(stream, bytes, end)` for its body, `on_reset(stream)` if the peer gives
up on it; it answers with `stream.send_headers`, `send_data` (`end=True`: the stream's last)
and `send_trailers`, and may wait for `stream.drained()` before sending more.  The limits a
connection advertises and enforces are an `Http2Limits`: gRPC's by default, kube-apiserver's
for the apiserver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

from machinery.hpack import Decoder, Encoder, HpackError

log = logging.getLogger("raftkube.etcdapi")

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
# SETTINGS identifiers
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 1, 2, 3, 4, 5
MAX_HEADER_LIST_SIZE = 6
# error codes
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED = 0, 1, 2, 3, 4, 5
FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 6, 7, 8, 9, 11

DEFAULT_WINDOW = 65_535
MAX_WINDOW = (1 << 31) - 1
DEFAULT_MAX_FRAME = 16_384

MAX_STREAMS = 1024
"""Streams a client may have open at once on one connection (more: REFUSED_STREAM)."""
RECV_WINDOW = 16 << 20
"""Bytes a client may have sent on a connection that we have not handed on yet (the
connection window we keep open): what one connection's unread requests may cost."""
STREAM_WINDOW = 4 << 20
"""The same for one stream (SETTINGS_INITIAL_WINDOW_SIZE we advertise)."""
OUR_MAX_FRAME = 1 << 20
"""The largest frame we accept (SETTINGS_MAX_FRAME_SIZE we advertise): fewer frames per big value."""
HEADER_LIST_LIMIT = 64 << 10
"""Decoded request headers per stream at most (SETTINGS_MAX_HEADER_LIST_SIZE)."""
HEADER_BLOCK_LIMIT = 64 << 10
"""Encoded header block bytes (HEADERS + CONTINUATIONs) per stream at most."""
WRITE_HIGH = 4 << 20
"""Unsent bytes in the transport above which we stop reading the connection's requests."""
PING_FLOOD = 1000
"""PINGs and SETTINGS a peer may send per second-ish before we call it abuse (ENHANCE_YOUR_CALM)."""
WINDOW_SETTINGS_LIMIT = 1000
"""SETTINGS_INITIAL_WINDOW_SIZE changes a connection may make (ENHANCE_YOUR_CALM beyond): each
that grows it walks the streams waiting for a window.  Clients change it a few times at most
(grpc-go's BDP estimator, as the window grows to 16 MiB)."""


@dataclass(frozen=True)
class Http2Limits:
    """What a connection advertises in its SETTINGS and enforces; the defaults are the etcd
    API's (gRPC: big messages, many watch streams per connection)."""

    max_streams: int = MAX_STREAMS
    recv_window: int = RECV_WINDOW
    stream_window: int = STREAM_WINDOW
    max_frame: int = OUR_MAX_FRAME
    header_list: int = HEADER_LIST_LIMIT
    header_block: int = HEADER_BLOCK_LIMIT

    def __post_init__(self) -> None:
        if not 1 <= self.max_streams <= 1 << 20:
            raise ValueError(f"max_streams must be from 1 to {1 << 20}, got {self.max_streams}")
        for name in ("recv_window", "stream_window"):
            if not DEFAULT_WINDOW <= getattr(self, name) <= MAX_WINDOW:
                raise ValueError(f"{name} must be from {DEFAULT_WINDOW} to {MAX_WINDOW}, got {getattr(self, name)}")
        if not DEFAULT_MAX_FRAME <= self.max_frame <= (1 << 24) - 1:
            raise ValueError(f"max_frame must be from {DEFAULT_MAX_FRAME} to {(1 << 24) - 1}, got {self.max_frame}")


class ConnectionError_(Exception):
    """A connection error: GOAWAY with `code` and the connection closes."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Handler(Protocol):
    """The application on top (gRPC)."""

    def on_headers(self, stream: Stream) -> None: ...

    def on_data(self, stream: Stream, data: bytes, end: bool) -> None: ...

    def on_reset(self, stream: Stream) -> None: ...


def _frame(kind: int, flags: int, stream_id: int, payload: bytes | memoryview = b"") -> bytes:
    n = len(payload)
    return bytes((n >> 16 & 0xFF, n >> 8 & 0xFF, n & 0xFF, kind, flags)) + stream_id.to_bytes(4, "big") + payload


class Stream:
    """One request and its answer.  `headers` are the decoded request headers; `app` is the
    handler's own state for it."""

    __slots__ = (
        "_credit",
        "_drain_waiter",
        "_end_after",
        "_ending",
        "_queue",
        "app",
        "closed",
        "conn",
        "headers",
        "id",
        "queued",
        "recv_unacked",
        "recv_window",
        "remote_closed",
    )

    def __init__(self, stream_id: int, conn: Http2Connection, headers: list[tuple[bytes, bytes]]) -> None:
        self.id = stream_id
        self.conn = conn
        self.headers = headers
        self.app: object = None
        self._credit = 0
        """The send window less the client's SETTINGS_INITIAL_WINDOW_SIZE (see `send_window`)."""
        self.recv_window = conn.limits.stream_window
        """What the client may still send on this stream before we give some back."""
        self.recv_unacked = 0
        self._queue: deque[bytes | memoryview] = deque()
        self.queued = 0
        """Bytes of DATA waiting for the peer's window."""
        self.closed = False
        self.remote_closed = False
        self._end_after: bytes | None = None
        """Trailers to send once the queued DATA is out."""
        self._ending = False
        """The last queued DATA ends the stream (`send_data(..., end=True)`)."""
        self._drain_waiter: asyncio.Future[None] | None = None

    @property
    def send_window(self) -> int:
        """What the client's flow control lets us send on this stream now.  Kept relative to its
        SETTINGS_INITIAL_WINDOW_SIZE, so that a change of the setting moves every stream's
        window at once, without a walk over the streams per SETTINGS frame."""
        return self._credit + self.conn.peer_initial_window

    @send_window.setter
    def send_window(self, value: int) -> None:
        self._credit = value - self.conn.peer_initial_window

    def header(self, name: bytes) -> bytes | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def backlog(self) -> int:
        """What this stream owes its client: queued here and unsent on the connection."""
        return self.queued + self.conn.transport_backlog()

    def send_headers(self, headers: list[tuple[bytes, bytes]], end: bool = False) -> None:
        if not self.closed:
            self.conn.write_headers(self.id, headers, end)
            if end:
                self._close()

    def send_data(self, data: bytes, end: bool = False) -> None:
        """Queue `data`; it goes out as the peer's flow-control windows allow.  `end`: the
        stream ends with it (END_STREAM on its last frame)."""
        if self.closed or self._ending or (not data and not end):
            return
        if (
            not self._queue
            and self.send_window >= len(data)
            and self.conn.send_window >= len(data)
            and (len(data) <= self.conn.peer_max_frame)
        ):
            self.send_window -= len(data)
            self.conn.send_window -= len(data)
            self.conn.write(_frame(DATA, END_STREAM if end else 0, self.id, data))
            if end:
                self._close()
            return
        if data:
            self._queue.append(data)
            self.queued += len(data)
        self._ending = end
        self.conn.flush_stream(self)

    async def drained(self) -> None:
        """Until this stream's queued DATA has gone to the socket and the socket's buffer is
        below its high-water mark (or the stream is closed): a sender's backpressure."""
        while not self.closed and (self._queue or self.conn.write_paused):
            waiter = self._drain_waiter
            if waiter is None or waiter.done():
                waiter = self._drain_waiter = asyncio.get_running_loop().create_future()
                self.conn.draining[self.id] = self
            await waiter

    def wake_drained(self) -> None:
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def send_trailers(self, headers: list[tuple[bytes, bytes]]) -> None:
        """End the stream with `headers`, after whatever DATA is still queued."""
        if self.closed:
            return
        if self._queue:
            self._end_after = self.conn.encoder.encode(headers)
            return
        self.send_headers(headers, end=True)

    def reset(self, code: int = CANCEL) -> None:
        if not self.closed:
            self.conn.write(_frame(RST_STREAM, 0, self.id, code.to_bytes(4, "big")))
            self._close()

    def _close(self) -> None:
        self.closed = True
        self._queue.clear()
        self.queued = 0
        self.conn.forget(self)
        self.wake_drained()

    def _pump(self) -> None:
        """Send what the windows allow (called by the connection)."""
        conn = self.conn
        while self._queue and self.send_window > 0 and conn.send_window > 0:
            chunk = self._queue[0]
            n = min(len(chunk), self.send_window, conn.send_window, conn.peer_max_frame)
            if n < len(chunk):
                # views, not copies: slicing the rest off as bytes copied it again for every
                # frame (a 10 MiB LIST in Go's 16 KiB frames: 285 ms, quadratic in its size)
                view = memoryview(chunk)
                self._queue[0] = view[n:]
                chunk = view[:n]
            else:
                self._queue.popleft()
            self.queued -= n
            self.send_window -= n
            conn.send_window -= n
            last = self._ending and not self._queue
            conn.write(_frame(DATA, END_STREAM if last else 0, self.id, chunk))
            if last:
                self._close()
                return
        if not self._queue and self._ending:  # ended with nothing queued behind a full window
            conn.write(_frame(DATA, END_STREAM, self.id))
            self._close()
            return
        if not self._queue:
            self.wake_drained()
        if not self._queue and self._end_after is not None:
            block, self._end_after = self._end_after, None
            conn.write_block(self.id, block, end=True)
            self._close()


class Http2Connection(asyncio.Protocol):
    """One client connection."""

    def __init__(
        self,
        handler_factory: Callable[[Http2Connection], Handler],
        on_close: Callable[[Http2Connection], None],
        frame_timeout: float | None = None,
        limits: Http2Limits | None = None,
    ) -> None:
        self.limits = limits or Http2Limits()
        self.handler = handler_factory(self)
        self.frame_timeout = frame_timeout
        """Seconds a client has to finish a frame (or the preface) it has begun; beyond, GOAWAY and
        the connection closes, as on our own protocol: nobody holds a half-sent frame's buffer for
        ever.  Between frames a connection may idle as long as it likes."""
        self._frame_timer: asyncio.TimerHandle | None = None
        self.on_close = on_close
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.preface_seen = False
        self.decoder = Decoder(max_header_list_size=self.limits.header_list)
        self.encoder = Encoder()
        self.streams: dict[int, Stream] = {}
        self.last_stream = 0
        self.peer_initial_window = DEFAULT_WINDOW
        self.peer_max_frame = DEFAULT_MAX_FRAME
        self.send_window = DEFAULT_WINDOW
        self.recv_window = self.limits.recv_window
        """What the client may still send on the connection before we give some back."""
        self.recv_unacked = 0
        """Bytes received and handed on but not yet given back by WINDOW_UPDATE."""
        self.partial = 0
        """Bytes held in request messages still arriving, all streams together (grpc.py)."""
        self.working = 0
        """Calls of this connection whose work (a task) has not ended, reset or not."""
        self._blocked: dict[int, Stream] = {}
        """Streams with DATA waiting for a window, in the order they got stuck."""
        self._out: list[bytes] = []
        self._out_bytes = 0
        """The bytes in `_out`, counted as they come (summing the list per call was quadratic in
        the frames of a loop turn: a read of 15,000 PINGs held the loop for seconds)."""
        self._flush_scheduled = False
        self._continuing: tuple[int, int, bytearray] | None = None
        """A header block being received: (stream id, flags of its HEADERS, fragments so far)."""
        self._reading_paused = False
        self.write_paused = False
        """The socket's buffer is over its high-water mark (the client is not reading)."""
        self.draining: dict[int, Stream] = {}
        """Streams whose senders wait in `Stream.drained`."""
        self._pings = 0
        self._window_settings = 0
        self.closed = False
        self.peer = "?"

    # ------------------------------------------------------------------ asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # not an isinstance check: uvloop's TLS transport is not an asyncio.Transport subclass
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        name = transport.get_extra_info("peername")
        self.peer = f"{name[0]}:{name[1]}" if isinstance(name, tuple) and len(name) >= 2 else str(name)
        transport.set_write_buffer_limits(high=WRITE_HIGH)
        settings = b"".join(
            struct.pack(">HI", k, v)
            for k, v in (
                (MAX_CONCURRENT_STREAMS, self.limits.max_streams),
                (INITIAL_WINDOW_SIZE, self.limits.stream_window),
                (MAX_FRAME_SIZE, self.limits.max_frame),
                (MAX_HEADER_LIST_SIZE, self.limits.header_list),
                (ENABLE_PUSH, 0),
            )
        )
        self.write(_frame(SETTINGS, 0, 0, settings))
        if self.limits.recv_window > DEFAULT_WINDOW:
            self.write(_frame(WINDOW_UPDATE, 0, 0, (self.limits.recv_window - DEFAULT_WINDOW).to_bytes(4, "big")))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._time_partial_frame(False)
        for s in list(self.streams.values()):
            s.closed = True
            with contextlib.suppress(Exception):
                self.handler.on_reset(s)
        self.streams.clear()
        self._blocked.clear()
        self._wake_draining()
        self.on_close(self)

    def pause_writing(self) -> None:
        # the client is not reading its answers: neither do we read its requests
        self.write_paused = True
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
            self._time_partial_frame(False)  # we are not reading: the client is not late

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake_draining()
        if self.transport is not None and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()
            self._time_partial_frame(True)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.buf += data
        before = len(self.buf)
        try:
            self._parse()
        except ConnectionError_ as e:
            self.goaway(e.code, str(e))
        except HpackError as e:
            self.goaway(COMPRESSION_ERROR, f"header block: {e}")
        self._time_partial_frame(len(self.buf) < before)

    def _wake_draining(self) -> None:
        draining, self.draining = self.draining, {}
        for s in draining.values():
            s.wake_drained()

    def _time_partial_frame(self, progressed: bool) -> None:
        """(Re)start the frame timeout while a begun frame is buffered (from its start: after
        `progressed`, what is buffered is a new frame), stop it otherwise."""
        if self.frame_timeout is None:
            return
        timer = self._frame_timer
        if not self.buf or self.closed or self._reading_paused:
            if timer is not None:
                timer.cancel()
                self._frame_timer = None
        elif timer is None or progressed:
            if timer is not None:
                timer.cancel()
            self._frame_timer = asyncio.get_running_loop().call_later(self.frame_timeout, self._frame_timed_out)

    def _frame_timed_out(self) -> None:
        self._frame_timer = None
        held = len(self.buf)
        self.goaway(
            PROTOCOL_ERROR,
            f"a frame is not complete {self.frame_timeout}s after its first byte "
            f"({held} bytes of it buffered; frame_timeout is {self.frame_timeout}s)",
        )
        self.buf = bytearray()

    # ------------------------------------------------------------------ output
    def write(self, data: bytes) -> None:
        """Queue bytes for the socket; everything written in one loop turn leaves in one write."""
        if self.closed:
            return
        self._out.append(data)
        self._out_bytes += len(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and self.transport is not None and not self.closed:
            out, self._out = self._out, []
            self._out_bytes = 0
            self.transport.write(b"".join(out))

    def transport_backlog(self) -> int:
        t = self.transport
        pending = self._out_bytes
        return pending + (t.get_write_buffer_size() if t is not None else 0)

    def write_headers(self, stream_id: int, headers: list[tuple[bytes, bytes]], end: bool) -> None:
        self.write_block(stream_id, self.encoder.encode(headers), end)

    def write_block(self, stream_id: int, block: bytes, end: bool) -> None:
        flags = END_HEADERS | (END_STREAM if end else 0)
        if len(block) <= self.peer_max_frame:
            self.write(_frame(HEADERS, flags, stream_id, block))
            return
        step = self.peer_max_frame
        parts = [block[i : i + step] for i in range(0, len(block), step)]
        self.write(_frame(HEADERS, END_STREAM if end else 0, stream_id, parts[0]))
        for i, part in enumerate(parts[1:], 1):
            self.write(_frame(CONTINUATION, END_HEADERS if i == len(parts) - 1 else 0, stream_id, part))

    def flush_stream(self, s: Stream) -> None:
        s._pump()
        if s._queue or s._end_after is not None:
            self._blocked[s.id] = s
        else:
            self._blocked.pop(s.id, None)

    def _unblock(self) -> None:
        for s in list(self._blocked.values()):
            if self.send_window <= 0:
                return
            self.flush_stream(s)

    def forget(self, s: Stream) -> None:
        self.streams.pop(s.id, None)
        self._blocked.pop(s.id, None)
        self.draining.pop(s.id, None)

    def goaway(self, code: int, message: str) -> None:
        if self.closed:
            return
        log.info("closing HTTP/2 connection from %s: %s", self.peer, message)
        payload = struct.pack(">II", self.last_stream, code) + message.encode()[:256]
        self.write(_frame(GOAWAY, 0, 0, payload))
        self._flush()
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection now, with whatever it owes."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def consumed(self, n: int, stream: Stream | None = None) -> None:
        """`n` bytes of DATA were handed on (or dropped): the client may send that many more,
        on the connection and on `stream`.  Given back in quarters of the windows, so that a
        stream of small messages (lease keep-alives) costs one WINDOW_UPDATE per megabyte."""
        if n <= 0:
            return
        self.recv_unacked += n
        if self.recv_unacked >= self.limits.recv_window // 4:
            self.recv_window += self.recv_unacked
            self.write(_frame(WINDOW_UPDATE, 0, 0, self.recv_unacked.to_bytes(4, "big")))
            self.recv_unacked = 0
        if stream is not None and not stream.remote_closed and not stream.closed:
            stream.recv_unacked += n
            if stream.recv_unacked >= self.limits.stream_window // 4:
                stream.recv_window += stream.recv_unacked
                self.write(_frame(WINDOW_UPDATE, 0, stream.id, stream.recv_unacked.to_bytes(4, "big")))
                stream.recv_unacked = 0

    # ------------------------------------------------------------------ input
    def _parse(self) -> None:
        buf = self.buf
        if not self.preface_seen:
            if len(buf) < len(PREFACE):
                if not PREFACE.startswith(bytes(buf)):
                    raise ConnectionError_(PROTOCOL_ERROR, "not an HTTP/2 connection preface")
                return
            if buf[: len(PREFACE)] != PREFACE:
                raise ConnectionError_(PROTOCOL_ERROR, "not an HTTP/2 connection preface")
            del buf[: len(PREFACE)]
            self.preface_seen = True
        pos = 0
        n = len(buf)
        max_frame = self.limits.max_frame
        try:
            while n - pos >= 9 and not self.closed:
                length = buf[pos] << 16 | buf[pos + 1] << 8 | buf[pos + 2]
                if length > max_frame:
                    raise ConnectionError_(FRAME_SIZE_ERROR, f"a frame of {length} bytes (limit {max_frame})")
                if n - pos < 9 + length:
                    break
                kind, flags = buf[pos + 3], buf[pos + 4]
                sid = int.from_bytes(buf[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
                payload = bytes(buf[pos + 9 : pos + 9 + length])
                pos += 9 + length
                self._frame(kind, flags, sid, payload)
        finally:
            del buf[:pos]

    def _frame(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if self._continuing is not None and kind != CONTINUATION:
            raise ConnectionError_(PROTOCOL_ERROR, "a header block interrupted by another frame")
        if kind == DATA:
            self._data(flags, sid, payload)
        elif kind == HEADERS:
            self._headers(flags, sid, payload)
        elif kind == CONTINUATION:
            self._continuation(flags, sid, payload)
        elif kind == SETTINGS:
            self._settings(flags, sid, payload)
        elif kind == WINDOW_UPDATE:
            self._window_update(sid, payload)
        elif kind == PING:
            self._ping(flags, sid, payload)
        elif kind == RST_STREAM:
            self._rst(sid, payload)
        elif kind == GOAWAY:
            if sid != 0:
                raise ConnectionError_(PROTOCOL_ERROR, "GOAWAY on a stream")
            # the client leaves: its streams finish, and it closes the socket
        elif kind == PRIORITY:
            if sid == 0 or len(payload) != 5:
                raise ConnectionError_(PROTOCOL_ERROR, "a malformed PRIORITY frame")
        elif kind == PUSH_PROMISE:
            raise ConnectionError_(PROTOCOL_ERROR, "a client may not push")
        # unknown frame types are ignored (RFC 9113 5.5)

    def _unpad(self, flags: int, payload: bytes) -> bytes:
        if flags & PADDED:
            if not payload or payload[0] >= len(payload):
                raise ConnectionError_(PROTOCOL_ERROR, "padding longer than the frame")
            return payload[1 : len(payload) - payload[0]]
        return payload

    def _data(self, flags: int, sid: int, payload: bytes) -> None:
        if sid == 0:
            raise ConnectionError_(PROTOCOL_ERROR, "DATA on stream 0")
        size = len(payload)
        self.recv_window -= size
        if self.recv_window < 0:
            raise ConnectionError_(FLOW_CONTROL_ERROR, "DATA beyond the connection's flow-control window")
        data = self._unpad(flags, payload)
        s = self.streams.get(sid)
        if s is None or s.remote_closed:
            if sid > self.last_stream:
                raise ConnectionError_(PROTOCOL_ERROR, f"DATA on idle stream {sid}")
            self.consumed(size)  # a stream we reset or ended: the connection window still counts it
            if s is not None:  # the client had ended it: a stream error, and the call is over
                s.reset(STREAM_CLOSED)
                self.handler.on_reset(s)
            return
        s.recv_window -= size
        if s.recv_window < 0:
            self.consumed(size)
            s.reset(FLOW_CONTROL_ERROR)
            self.handler.on_reset(s)
            return
        # the padding counts against the windows but is never handed on
        self.consumed(size - len(data), s)
        end = bool(flags & END_STREAM)
        if end:
            s.remote_closed = True
        self.handler.on_data(s, data, end)

    def _headers(self, flags: int, sid: int, payload: bytes) -> None:
        if sid == 0 or sid % 2 == 0:
            raise ConnectionError_(PROTOCOL_ERROR, f"HEADERS on stream {sid}")
        block = self._unpad(flags, payload)
        limit = self.limits.header_block
        if len(block) > limit:  # one frame may carry max_frame bytes: the block's limit still holds
            raise ConnectionError_(ENHANCE_YOUR_CALM, f"a header block over {limit} bytes")
        if flags & PRIORITY_FLAG:
            if len(block) < 5:
                raise ConnectionError_(PROTOCOL_ERROR, "a malformed priority in HEADERS")
            block = block[5:]
        if flags & END_HEADERS:
            self._header_block(sid, flags, block)
        else:
            self._continuing = (sid, flags, bytearray(block))

    def _continuation(self, flags: int, sid: int, payload: bytes) -> None:
        if self._continuing is None or self._continuing[0] != sid:
            raise ConnectionError_(PROTOCOL_ERROR, "CONTINUATION without its HEADERS")
        first_flags, fragments = self._continuing[1], self._continuing[2]
        fragments += payload
        if len(fragments) > self.limits.header_block:
            raise ConnectionError_(ENHANCE_YOUR_CALM, f"a header block over {self.limits.header_block} bytes")
        if flags & END_HEADERS:
            self._continuing = None
            self._header_block(sid, first_flags, bytes(fragments))

    def _header_block(self, sid: int, flags: int, block: bytes) -> None:
        headers = self.decoder.decode(block)  # always: the HPACK state must advance
        s = self.streams.get(sid)
        if s is not None:  # trailers from the client (gRPC never sends them): the request ends
            if not flags & END_STREAM:
                raise ConnectionError_(PROTOCOL_ERROR, "a second header block without END_STREAM")
            if s.remote_closed:  # after the client's END_STREAM: a stream error (RFC 9113 5.1)
                s.reset(STREAM_CLOSED)
                self.handler.on_reset(s)
                return
            s.remote_closed = True
            self.handler.on_data(s, b"", True)
            return
        if sid <= self.last_stream:
            raise ConnectionError_(STREAM_CLOSED if sid in self.streams else PROTOCOL_ERROR, f"stream {sid} reused")
        self.last_stream = sid
        if len(self.streams) >= self.limits.max_streams or self.working >= self.limits.max_streams:
            # `working` also counts calls the client reset whose work goes on: resetting each
            # stream at once (the "rapid reset" attack) buys no more than max_streams of work
            self.write(_frame(RST_STREAM, 0, sid, REFUSED_STREAM.to_bytes(4, "big")))
            return
        s = Stream(sid, self, headers)
        self.streams[sid] = s
        if flags & END_STREAM:
            s.remote_closed = True
        self.handler.on_headers(s)
        if s.remote_closed and not s.closed:
            self.handler.on_data(s, b"", True)

    def _settings(self, flags: int, sid: int, payload: bytes) -> None:
        if sid != 0:
            raise ConnectionError_(PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise ConnectionError_(FRAME_SIZE_ERROR, "a SETTINGS ack with a payload")
            return
        if len(payload) % 6:
            raise ConnectionError_(FRAME_SIZE_ERROR, "SETTINGS not a multiple of 6 bytes")
        self._count_control()
        window = self.peer_initial_window
        for off in range(0, len(payload), 6):
            key, value = struct.unpack_from(">HI", payload, off)
            if key == INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise ConnectionError_(FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1")
                window = value
            elif key == MAX_FRAME_SIZE:
                if not DEFAULT_MAX_FRAME <= value <= (1 << 24) - 1:
                    raise ConnectionError_(PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value} out of range")
                self.peer_max_frame = value
            elif key == ENABLE_PUSH and value > 1:
                raise ConnectionError_(PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH must be 0 or 1")
            # HEADER_TABLE_SIZE: our encoder never indexes, so any table size suits it
        # Only a window that grew can let queued DATA go: no other SETTINGS frame walks the
        # streams (a flood of them against 1024 blocked streams used to hold the loop).
        delta = window - self.peer_initial_window
        if delta:
            self._window_settings += 1
            if self._window_settings > WINDOW_SETTINGS_LIMIT:
                raise ConnectionError_(ENHANCE_YOUR_CALM, "too many SETTINGS_INITIAL_WINDOW_SIZE changes")
            self.peer_initial_window = window  # every stream's window moves with it (Stream.send_window)
        self.write(_frame(SETTINGS, ACK, 0))
        if delta > 0:
            self._unblock()

    def _window_update(self, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ConnectionError_(FRAME_SIZE_ERROR, "a WINDOW_UPDATE of other than 4 bytes")
        inc = int.from_bytes(payload, "big") & 0x7FFFFFFF
        if sid == 0:
            if inc == 0:
                raise ConnectionError_(PROTOCOL_ERROR, "a WINDOW_UPDATE of 0")
            self.send_window += inc
            if self.send_window > MAX_WINDOW:
                raise ConnectionError_(FLOW_CONTROL_ERROR, "the connection window passed 2^31-1")
            self._unblock()
            return
        s = self.streams.get(sid)
        if s is None:
            return  # a stream that is done: harmless
        if inc == 0:
            s.reset(PROTOCOL_ERROR)
            self.handler.on_reset(s)
            return
        s.send_window += inc
        if s.send_window > MAX_WINDOW:
            s.reset(FLOW_CONTROL_ERROR)
            self.handler.on_reset(s)
            return
        self.flush_stream(s)

    def _ping(self, flags: int, sid: int, payload: bytes) -> None:
        if sid != 0:
            raise ConnectionError_(PROTOCOL_ERROR, "PING on a stream")
        if len(payload) != 8:
            raise ConnectionError_(FRAME_SIZE_ERROR, "a PING of other than 8 bytes")
        if flags & ACK:
            return
        self._count_control()
        self.write(_frame(PING, ACK, 0, payload))

    def _count_control(self) -> None:
        """PINGs and SETTINGS cost us an answer each: a flood of them is refused (its answers
        would otherwise pile up unsent while the client does not read)."""
        self._pings += 1
        if self._pings > PING_FLOOD and self.transport_backlog() > WRITE_HIGH:
            raise ConnectionError_(ENHANCE_YOUR_CALM, "too many PING/SETTINGS frames while not reading the answers")
        if self.transport_backlog() == 0:
            self._pings = 0

    def _rst(self, sid: int, payload: bytes) -> None:
        if sid == 0:
            raise ConnectionError_(PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise ConnectionError_(FRAME_SIZE_ERROR, "an RST_STREAM of other than 4 bytes")
        if sid > self.last_stream:
            raise ConnectionError_(PROTOCOL_ERROR, f"RST_STREAM on idle stream {sid}")
        s = self.streams.get(sid)
        if s is not None:
            s.closed = True
            self.forget(s)
            self.handler.on_reset(s)
