"""HTTP/2 and gRPC written and read by hand, for the tests that send a member what no
well-behaved client would (test_http2.py in process, test_hostile_etcd_clients.py against
member processes).

The frame numbers are RFC 9113's, written out here rather than taken from the server
(machinery/http2.py), so that a wrong constant there shows as a failing test.  Request
headers are HPACK-encoded with the server's own stateless encoder and answers decoded with
its decoder: both are checked against RFC 7541 on their own (test_hpack.py).

`Answers` parses what a server wrote (any split of the bytes) into frames and, per stream,
the header lists, DATA and resets; `RawH2` is a blocking socket (TLS with ALPN h2, or
plaintext) whose every read has a deadline.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from hypothesis import strategies as st

from machinery.hpack import Decoder, Encoder

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# frame types (RFC 9113 6)
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
# flags
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
# SETTINGS identifiers (6.5.2)
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 1, 2, 3, 4, 5
MAX_HEADER_LIST_SIZE = 6
# error codes (7)
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED = 0, 1, 2, 3, 4, 5
FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, ENHANCE_YOUR_CALM = 6, 7, 8, 9, 10, 11

# gRPC status codes
GRPC_OK, CANCELLED, INVALID_ARGUMENT, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL = (
    0,
    1,
    3,
    4,
    8,
    12,
    13,
)

_encoder = Encoder()


def frame(kind: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", sid) + payload


def settings(*pairs: tuple[int, int], ack: bool = False) -> bytes:
    return frame(SETTINGS, ACK if ack else 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def ping(opaque: bytes = b"01234567", ack: bool = False) -> bytes:
    return frame(PING, ACK if ack else 0, 0, opaque)


def window_update(sid: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", increment))


def rst_stream(sid: int, code: int = CANCEL) -> bytes:
    return frame(RST_STREAM, 0, sid, struct.pack(">I", code))


def data(sid: int, payload: bytes, end: bool = False) -> bytes:
    return frame(DATA, END_STREAM if end else 0, sid, payload)


def grpc_headers(path: str, *extra: tuple[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    """A gRPC request's headers, as grpc-go sends them."""
    return [
        (b":method", b"POST"),
        (b":scheme", b"https"),
        (b":path", path.encode()),
        (b":authority", b"localhost"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        *extra,
    ]


def headers(sid: int, fields: list[tuple[bytes, bytes]], end: bool = False, end_headers: bool = True) -> bytes:
    flags = (END_STREAM if end else 0) | (END_HEADERS if end_headers else 0)
    return frame(HEADERS, flags, sid, _encoder.encode(fields))


def grpc_message(body: bytes, compressed: bool = False) -> bytes:
    return bytes((1 if compressed else 0,)) + struct.pack(">I", len(body)) + body


def unary(sid: int, path: str, body: bytes) -> bytes:
    """A whole unary call on stream `sid`: headers, its one message, END_STREAM."""
    return headers(sid, grpc_headers(path)) + data(sid, grpc_message(body), end=True)


def hello(*pairs: tuple[int, int]) -> bytes:
    """What a client sends first: the preface and its SETTINGS."""
    return PREFACE + settings(*pairs)


@dataclass
class Frame:
    kind: int
    flags: int
    sid: int
    payload: bytes


@dataclass
class Answers:
    """What a server has written, parsed: frames in order and, per stream, its header lists,
    its DATA, its RST_STREAM code and whether it ended."""

    frames: list[Frame] = field(default_factory=list)
    header_lists: dict[int, list[list[tuple[bytes, bytes]]]] = field(default_factory=dict)
    body: dict[int, bytearray] = field(default_factory=dict)
    resets: dict[int, int] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)
    goaway: tuple[int, int, bytes] | None = None
    """(last stream id, error code, debug data) of the GOAWAY, if one came."""
    eof: bool = False
    _buf: bytearray = field(default_factory=bytearray)
    _decoder: Decoder = field(default_factory=lambda: Decoder(max_header_list_size=1 << 20))
    _block: tuple[int, int, bytearray] | None = None

    def feed(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while len(buf) >= 9:
            length = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + length:
                break
            f = Frame(buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, bytes(buf[9 : 9 + length]))
            del buf[: 9 + length]
            self.frames.append(f)
            self._take(f)

    def _take(self, f: Frame) -> None:
        if f.kind == GOAWAY:
            last, code = struct.unpack(">II", f.payload[:8])
            self.goaway = (last & 0x7FFFFFFF, code, f.payload[8:])
        elif f.kind == RST_STREAM:
            self.resets[f.sid] = struct.unpack(">I", f.payload)[0]
        elif f.kind == DATA:
            self.body.setdefault(f.sid, bytearray()).extend(f.payload)
            if f.flags & END_STREAM:
                self.ended.add(f.sid)
        elif f.kind == HEADERS:
            self._block = (f.sid, f.flags, bytearray(f.payload))
            if f.flags & END_HEADERS:
                self._end_block()
        elif f.kind == CONTINUATION:
            assert self._block is not None and self._block[0] == f.sid, "a CONTINUATION without its HEADERS"
            self._block[2].extend(f.payload)
            if f.flags & END_HEADERS:
                self._end_block()

    def _end_block(self) -> None:
        assert self._block is not None
        sid, flags, block = self._block
        self._block = None
        self.header_lists.setdefault(sid, []).append(self._decoder.decode(bytes(block)))
        if flags & END_STREAM:
            self.ended.add(sid)

    # -- questions --------------------------------------------------------------------------
    def of(self, kind: int) -> list[Frame]:
        return [f for f in self.frames if f.kind == kind]

    def done(self, sid: int) -> bool:
        """Whether stream `sid` is over (ended or reset), or the whole connection is."""
        return sid in self.ended or sid in self.resets or self.goaway is not None or self.eof

    def status(self, sid: int) -> tuple[int, str] | None:
        """The gRPC status (code, message) that ended stream `sid`, if it has."""
        for fields in reversed(self.header_lists.get(sid, [])):
            d = dict(fields)
            if b"grpc-status" in d:
                return int(d[b"grpc-status"]), unquote_to_bytes(d.get(b"grpc-message", b"")).decode()
        return None

    def http_status(self, sid: int) -> bytes | None:
        lists = self.header_lists.get(sid, [])
        return dict(lists[0]).get(b":status") if lists else None

    def messages(self, sid: int) -> list[bytes]:
        """The gRPC messages stream `sid` carried (a partial one at the end left out)."""
        body, out, pos = bytes(self.body.get(sid, b"")), [], 0
        while pos + 5 <= len(body):
            n = int.from_bytes(body[pos + 1 : pos + 5], "big")
            if pos + 5 + n > len(body):
                break
            out.append(body[pos + 5 : pos + 5 + n])
            pos += 5 + n
        return out


class RawH2:
    """A client socket that writes whatever bytes a test makes and parses what comes back.
    Blocking, with a deadline on every read; `close` when done (or use it in a `with`)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.answers = Answers()

    @classmethod
    def connect(
        cls,
        port: int,
        tls: ssl.SSLContext | None,
        first: bytes | None = None,
        timeout: float = 5.0,
        buffers: int | None = None,
    ) -> RawH2:
        """Connected (TLS with ALPN h2 when `tls`), and `first` sent (by default the preface
        and an empty SETTINGS).  `buffers`: the socket's send and receive buffer sizes (small:
        a client that stops reading shows sooner)."""
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock: socket.socket = raw
        try:
            if buffers is not None:
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffers)
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffers)
            raw.settimeout(timeout)
            raw.connect(("127.0.0.1", port))
            if tls is not None:
                sock = tls.wrap_socket(raw, server_hostname="127.0.0.1")
                assert isinstance(sock, ssl.SSLSocket) and sock.selected_alpn_protocol() == "h2"
        except BaseException:
            raw.close()
            raise
        conn = cls(sock)
        conn.send(hello() if first is None else first)
        return conn

    def __enter__(self) -> RawH2:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.settimeout(5.0)
        self.sock.sendall(data)

    def offer(self, data: bytes) -> bool:
        """Send `data` unless the server has closed the connection (then False)."""
        try:
            self.send(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):
            return False
        return True

    def send_until_blocked(self, chunk: bytes, limit: int, blocked_after: float = 1.0) -> int:
        """Send `chunk` again and again, never reading, until `limit` bytes went or a send
        has waited `blocked_after` seconds (the server stopped reading): the bytes sent."""
        sent, pos, view = 0, 0, memoryview(chunk)
        self.sock.settimeout(blocked_after)
        try:
            while sent < limit:
                n = self.sock.send(view[pos:])
                sent += n
                pos = (pos + n) % len(chunk)
        except (TimeoutError, BlockingIOError, ssl.SSLWantWriteError):
            pass
        except OSError:
            pass  # the server closed the connection: what it sent is read next
        return sent

    def read(self, until: Callable[[Answers], bool], timeout: float = 5.0) -> Answers:
        """Read until `until(answers)` holds, the connection ends, or `timeout` seconds pass
        (then `until` simply does not hold: the caller's assertion says what was missing)."""
        a = self.answers
        deadline = time.monotonic() + timeout
        while not until(a) and not a.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.sock.settimeout(left)
            try:
                got = self.sock.recv(1 << 16)
            except (TimeoutError, ssl.SSLWantReadError):
                break
            except OSError:  # reset by the server
                a.eof = True
                break
            if not got:
                a.eof = True
                break
            a.feed(got)
        return a

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        """Whether the server closes the connection within `timeout` (reading what it sends)."""
        return self.read(lambda a: False, timeout).eof


def frames(paths: list[str]) -> st.SearchStrategy[bytes]:
    """One HTTP/2 frame for a fuzz: any type, flags and stream id with payloads that are often
    nearly right (4-byte increments, 8-byte pings, SETTINGS pairs, gRPC request header blocks
    for `paths`, gRPC messages), or a well-formed request HEADERS or control frame."""
    sid = st.sampled_from([0, 1, 2, 3, 5, 7, 9, 0x7FFFFFFF, 0xFFFFFFFF])  # the last: the reserved bit set
    payload = st.one_of(
        st.binary(max_size=24),
        st.integers(0, 0xFFFFFFFF).map(lambda n: struct.pack(">I", n)),
        st.just(b"\0" * 8),
        st.lists(st.tuples(st.integers(0, 8), st.integers(0, 0xFFFFFFFF)), max_size=3).map(
            lambda ps: b"".join(struct.pack(">HI", k, v) for k, v in ps)
        ),
        st.sampled_from([_encoder.encode(grpc_headers(p)) for p in [*paths, "/x/y"]]),
        st.binary(max_size=60).map(grpc_message),
    )
    raw = st.builds(
        frame,
        st.integers(0, 12),
        st.integers(0, 255),
        sid,
        payload,
    )
    good = st.builds(
        lambda s, p, end: headers(s, grpc_headers(p), end=end),
        st.sampled_from([1, 3, 5, 7, 9]),
        st.sampled_from(paths),
        st.booleans(),
    )
    return st.one_of(raw, good, st.sampled_from([ping(), settings(), window_update(0, 1000)]))
