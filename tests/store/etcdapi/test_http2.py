"""The etcd API's HTTP/2 server and gRPC layer (machinery/http2.py, grpc.py) fed hostile
bytes in process, through a fake transport: every malformed frame gets HTTP/2's error (the
GOAWAY or RST_STREAM code RFC 9113 names), every bad call gRPC's status with grpc-go's words,
every limit holds (streams, header blocks, flow-control windows both ways, PING floods,
half-sent frames), no read of control frames costs more than time linear in its size, a call
however it ends gives its bytes' window back and tells its handler, and nothing a client
sends raises out of `data_received`.

Why in process: each rule is shown exactly (the code, the stream, what the handler was told)
in microseconds, so the fuzz can try thousands of frame sequences; test_hostile_etcd_clients.py
shows the same attacks against member processes, where memory and "the member keeps serving"
can be measured."""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from machinery import http2
from machinery.http2 import (
    HEADER_BLOCK_LIMIT,
    MAX_STREAMS,
    OUR_MAX_FRAME,
    PING_FLOOD,
    RECV_WINDOW,
    STREAM_WINDOW,
    WINDOW_SETTINGS_LIMIT,
    WRITE_HIGH,
    Http2Connection,
    Stream,
)
from store.etcdapi.grpc import Call, GrpcHandler, Route
from store.etcdapi.messages import SERVICES, pb
from tests.support import h2wire as w

MAX_MESSAGE = 64 << 10
RANGE = SERVICES["KV"]["Range"].path
WATCH = SERVICES["Watch"]["Watch"].path


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


class FakeTransport(asyncio.Transport):
    """What the connection writes, kept; `unsent` plays a client that does not read."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False
        self.reading = True
        self.unsent = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 4242) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "written after close"
        self.out += data

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


class Recorder:
    """An HTTP/2 handler that notes what it is told; it hands DATA on (gives the window back)
    only when `consume`."""

    def __init__(self, conn: Http2Connection, consume: bool = True) -> None:
        self.conn = conn
        self.consume = consume
        self.opened: list[int] = []
        self.received: dict[int, int] = {}
        self.ended: list[int] = []
        self.reset: list[int] = []

    def on_headers(self, stream: Stream) -> None:
        self.opened.append(stream.id)

    def on_data(self, stream: Stream, data: bytes, end: bool) -> None:
        self.received[stream.id] = self.received.get(stream.id, 0) + len(data)
        if self.consume:
            self.conn.consumed(len(data), stream)
        if end:
            self.ended.append(stream.id)

    def on_reset(self, stream: Stream) -> None:
        self.reset.append(stream.id)


class Peer:
    """A client of one in-process connection: `send` feeds it bytes and returns, once its
    answers are flushed, everything it has written so far, parsed."""

    def __init__(self, handler: Callable[[Http2Connection], Any], frame_timeout: float | None = None) -> None:
        self.transport = FakeTransport()
        self.closed_calls = 0
        self.conn = Http2Connection(handler, self._gone, frame_timeout=frame_timeout)
        self.conn.connection_made(self.transport)
        self.answers = w.Answers()
        self._seen = 0

    def _gone(self, conn: Http2Connection) -> None:
        self.closed_calls += 1

    async def send(self, *data: bytes) -> w.Answers:
        for d in data:
            self.conn.data_received(d)
        return await self.flushed()

    async def flushed(self) -> w.Answers:
        for _ in range(3):
            await asyncio.sleep(0)
        out = self.transport.out
        self.answers.feed(bytes(out[self._seen :]))
        self._seen = len(out)
        return self.answers

    def lose(self) -> None:
        self.transport.closed = True
        self.conn.connection_lost(None)

    @property
    def handler(self) -> Any:
        return self.conn.handler


def recorder_peer(consume: bool = True, frame_timeout: float | None = None) -> Peer:
    return Peer(lambda c: Recorder(c, consume), frame_timeout)


def goaway_code(a: w.Answers) -> int | None:
    return None if a.goaway is None else a.goaway[1]


async def still_answers(p: Peer) -> bool:
    """Whether the connection is open and answers a PING."""
    before = len(p.answers.of(w.PING))
    a = await p.send(w.ping(b"stillok!"))
    return not p.transport.closed and a.goaway is None and len(a.of(w.PING)) > before


# ---------------------------------------------------------------------- connection errors

HEADERS_1 = w.headers(1, w.grpc_headers(RANGE))

CONNECTION_ERRORS: list[tuple[str, bytes, int]] = [
    ("an HTTP/1.1 request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", w.PROTOCOL_ERROR),
    ("a preface with a wrong tail", b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", w.PROTOCOL_ERROR),
    (
        "a frame over our SETTINGS_MAX_FRAME_SIZE",
        struct.pack(">I", OUR_MAX_FRAME + 1)[1:] + b"\0" * 6,
        w.FRAME_SIZE_ERROR,
    ),
    ("SETTINGS on a stream", w.frame(w.SETTINGS, 0, 1), w.PROTOCOL_ERROR),
    ("SETTINGS of 5 bytes", w.frame(w.SETTINGS, 0, 0, b"\0" * 5), w.FRAME_SIZE_ERROR),
    ("a SETTINGS ack with a payload", w.frame(w.SETTINGS, w.ACK, 0, b"\0" * 6), w.FRAME_SIZE_ERROR),
    ("SETTINGS_INITIAL_WINDOW_SIZE 2^31", w.settings((w.INITIAL_WINDOW_SIZE, 1 << 31)), w.FLOW_CONTROL_ERROR),
    ("SETTINGS_MAX_FRAME_SIZE below 2^14", w.settings((w.MAX_FRAME_SIZE, (1 << 14) - 1)), w.PROTOCOL_ERROR),
    ("SETTINGS_MAX_FRAME_SIZE 2^24", w.settings((w.MAX_FRAME_SIZE, 1 << 24)), w.PROTOCOL_ERROR),
    ("SETTINGS_ENABLE_PUSH 2", w.settings((w.ENABLE_PUSH, 2)), w.PROTOCOL_ERROR),
    ("PING on a stream", w.frame(w.PING, 0, 1, b"\0" * 8), w.PROTOCOL_ERROR),
    ("a PING of 7 bytes", w.frame(w.PING, 0, 0, b"\0" * 7), w.FRAME_SIZE_ERROR),
    ("a WINDOW_UPDATE of 3 bytes", w.frame(w.WINDOW_UPDATE, 0, 0, b"\0" * 3), w.FRAME_SIZE_ERROR),
    ("a connection WINDOW_UPDATE of 0", w.window_update(0, 0), w.PROTOCOL_ERROR),
    ("the connection window past 2^31-1", w.window_update(0, (1 << 31) - 1), w.FLOW_CONTROL_ERROR),
    ("RST_STREAM on stream 0", w.rst_stream(0), w.PROTOCOL_ERROR),
    ("RST_STREAM on an idle stream", w.rst_stream(5), w.PROTOCOL_ERROR),
    ("an RST_STREAM of 3 bytes", HEADERS_1 + w.frame(w.RST_STREAM, 0, 1, b"\0" * 3), w.FRAME_SIZE_ERROR),
    ("HEADERS on stream 0", w.headers(0, w.grpc_headers(RANGE)), w.PROTOCOL_ERROR),
    ("HEADERS on an even stream", w.headers(2, w.grpc_headers(RANGE)), w.PROTOCOL_ERROR),
    ("a stream id going back", w.headers(3, w.grpc_headers(RANGE)) + HEADERS_1, w.PROTOCOL_ERROR),
    ("PUSH_PROMISE from a client", w.frame(w.PUSH_PROMISE, w.END_HEADERS, 1, b"\0\0\0\2"), w.PROTOCOL_ERROR),
    ("DATA on stream 0", w.data(0, b"x"), w.PROTOCOL_ERROR),
    ("DATA on an idle stream", w.data(9, b"x"), w.PROTOCOL_ERROR),
    ("DATA padded past its end", HEADERS_1 + w.frame(w.DATA, w.PADDED, 1, b"\x05abc"), w.PROTOCOL_ERROR),
    ("HEADERS padded past its end", w.frame(w.HEADERS, w.PADDED | w.END_HEADERS, 1, b"\x09\x82"), w.PROTOCOL_ERROR),
    (
        "HEADERS with a short priority",
        w.frame(w.HEADERS, w.PRIORITY_FLAG | w.END_HEADERS, 1, b"\0\0"),
        w.PROTOCOL_ERROR,
    ),
    ("PRIORITY on stream 0", w.frame(w.PRIORITY, 0, 0, b"\0" * 5), w.PROTOCOL_ERROR),
    ("a PRIORITY of 4 bytes", w.frame(w.PRIORITY, 0, 1, b"\0" * 4), w.PROTOCOL_ERROR),
    ("GOAWAY on a stream", w.frame(w.GOAWAY, 0, 1, b"\0" * 8), w.PROTOCOL_ERROR),
    ("CONTINUATION without HEADERS", w.frame(w.CONTINUATION, w.END_HEADERS, 1, b"\x82"), w.PROTOCOL_ERROR),
    (
        "a header block interrupted",
        w.headers(1, w.grpc_headers(RANGE), end_headers=False) + w.ping(),
        w.PROTOCOL_ERROR,
    ),
    (
        "a CONTINUATION of another stream",
        w.headers(1, w.grpc_headers(RANGE), end_headers=False) + w.frame(w.CONTINUATION, w.END_HEADERS, 3, b"\x82"),
        w.PROTOCOL_ERROR,
    ),
    ("HPACK index 0", w.frame(w.HEADERS, w.END_HEADERS, 1, b"\x80"), w.COMPRESSION_ERROR),
    ("HPACK index past the tables", w.frame(w.HEADERS, w.END_HEADERS, 1, b"\xff\x80\x01"), w.COMPRESSION_ERROR),
    (
        "a decoded header list over SETTINGS_MAX_HEADER_LIST_SIZE",
        w.headers(1, [(b"a", b"")] * 2000),  # 8 kB encoded, 66 kB as RFC 9113 counts a list
        w.COMPRESSION_ERROR,
    ),
    (
        "a header block over the limit in one HEADERS frame",
        w.headers(1, [(b"x-%d" % i, b"v" * 8000) for i in range(9)]),
        w.ENHANCE_YOUR_CALM,
    ),
    ("trailers without END_STREAM", HEADERS_1 + w.headers(1, [(b"x", b"y")]), w.PROTOCOL_ERROR),
]


@pytest.mark.parametrize(
    ("bad", "code"), [(b, c) for _, b, c in CONNECTION_ERRORS], ids=[n for n, _, _ in CONNECTION_ERRORS]
)
def test_a_malformed_frame_is_a_connection_error_with_rfc_9113s_code(bad: bytes, code: int) -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer()
        start = bad if bad.startswith((b"GET", b"PRI")) else w.hello() + bad
        a = await p.send(start)
        more = len(p.transport.out)
        await p.send(w.ping(), HEADERS_1)  # nothing is read after a GOAWAY
        assert len(p.transport.out) == more
        return p, a

    p, a = run(go())
    assert goaway_code(a) == code, (a.goaway, a.resets)
    assert p.transport.closed
    assert a.goaway is not None and a.goaway[2], "the GOAWAY says why"


def test_the_goaway_names_the_last_stream_taken_and_streams_are_told() -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer()
        await p.send(w.hello(), HEADERS_1, w.headers(3, w.grpc_headers(RANGE)))
        a = await p.send(w.frame(w.PING, 0, 0, b"\0" * 9))
        p.lose()
        return p, a

    p, a = run(go())
    assert a.goaway is not None and a.goaway[:2] == (3, w.FRAME_SIZE_ERROR)
    assert sorted(p.handler.reset) == [1, 3]  # the connection's streams end with it
    assert p.closed_calls == 1


# ---------------------------------------------------------------------- settings and pings


def test_good_settings_are_acked_and_unknown_ones_ignored() -> None:
    async def go() -> w.Answers:
        p = recorder_peer()
        return await p.send(
            w.hello((w.HEADER_TABLE_SIZE, 0), (w.MAX_FRAME_SIZE, (1 << 24) - 1), (0x99, 7), (w.ENABLE_PUSH, 1))
        )

    a = run(go())
    assert a.goaway is None
    assert [f.flags for f in a.of(w.SETTINGS)] == [0, w.ACK]  # ours, then the ack of theirs
    ours = a.of(w.SETTINGS)[0].payload
    advertised = dict(struct.unpack(">HI", ours[i : i + 6]) for i in range(0, len(ours), 6))
    assert advertised[w.MAX_CONCURRENT_STREAMS] == MAX_STREAMS
    assert advertised[w.INITIAL_WINDOW_SIZE] == STREAM_WINDOW
    assert advertised[w.ENABLE_PUSH] == 0


def test_a_ping_flood_from_a_client_that_reads_is_answered() -> None:
    async def go() -> w.Answers:
        p = recorder_peer()
        return await p.send(w.hello(), w.ping() * (3 * PING_FLOOD))

    a = run(go())
    assert a.goaway is None and len([f for f in a.of(w.PING) if f.flags & w.ACK]) == 3 * PING_FLOOD


@pytest.mark.parametrize("flood", [w.ping(), w.settings()], ids=["PING", "SETTINGS"])
def test_a_control_frame_flood_while_not_reading_is_enhance_your_calm(flood: bytes) -> None:
    async def go() -> w.Answers:
        p = recorder_peer()
        await p.send(w.hello())
        p.transport.unsent = WRITE_HIGH + 1  # its answers pile up unsent
        return await p.send(flood * (PING_FLOOD + 1))

    a = run(go())
    assert goaway_code(a) == w.ENHANCE_YOUR_CALM


def _timed(p: Peer, data: bytes) -> float:
    start = time.perf_counter()
    p.conn.data_received(data)
    return time.perf_counter() - start


def test_a_read_full_of_pings_costs_time_linear_in_its_size() -> None:
    """Each PING used to sum the connection's unsent frames of the loop turn: 15,000 PINGs in
    one read (255 kB) held the member's event loop for 6 s, past any election timeout."""

    async def go() -> tuple[float, w.Answers]:
        p = recorder_peer()
        await p.send(w.hello())
        took = _timed(p, w.ping() * 30_000)
        return took, await p.flushed()

    took, a = run(go())
    assert len(a.of(w.PING)) == 30_000
    assert took < 1.5, f"30,000 PINGs took {took:.1f} s"


def _blocked_streams_peer() -> Callable[[], Awaitable[Peer]]:
    async def make() -> Peer:
        p = recorder_peer()
        await p.send(w.hello((w.INITIAL_WINDOW_SIZE, 0)))
        await p.send(b"".join(w.headers(2 * i + 1, w.grpc_headers(RANGE)) for i in range(MAX_STREAMS)))
        for s in list(p.conn.streams.values()):
            s.send_headers([(b":status", b"200")])
            s.send_data(b"x" * 100)  # waits: the client's window is 0
        await p.flushed()
        assert len(p.conn._blocked) == MAX_STREAMS
        return p

    return make


def test_settings_frames_cost_no_walk_over_streams_waiting_for_a_window() -> None:
    """Each SETTINGS frame used to walk every stream waiting for a window: 1024 of them and a
    read of empty SETTINGS held the loop 130 us a frame, seconds a read."""

    async def go() -> tuple[float, w.Answers]:
        p = await _blocked_streams_peer()()
        took = _timed(p, w.settings() * 15_000 + w.settings((w.INITIAL_WINDOW_SIZE, 0)) * 15_000)
        return took, await p.flushed()

    took, a = run(go())
    assert a.goaway is None and len([f for f in a.of(w.SETTINGS) if f.flags & w.ACK]) == 30_001
    assert took < 1.5, f"30,000 SETTINGS took {took:.1f} s"


def test_a_flood_of_window_size_changes_is_enhance_your_calm() -> None:
    async def go() -> tuple[float, w.Answers]:
        p = await _blocked_streams_peer()()
        flip = w.settings((w.INITIAL_WINDOW_SIZE, 1)) + w.settings((w.INITIAL_WINDOW_SIZE, 0))
        took = _timed(p, flip * WINDOW_SETTINGS_LIMIT)
        return took, await p.flushed()

    took, a = run(go())
    assert goaway_code(a) == w.ENHANCE_YOUR_CALM
    assert took < 3


def test_a_window_the_client_shrinks_below_zero_waits_for_its_updates() -> None:
    async def go() -> list[int]:
        p = recorder_peer()
        await p.send(w.hello((w.INITIAL_WINDOW_SIZE, 1000)), HEADERS_1)
        s = p.conn.streams[1]
        s.send_headers([(b":status", b"200")])
        s.send_data(b"q" * 3000)
        sent = [len((await p.flushed()).body[1])]
        sent.append(len((await p.send(w.settings((w.INITIAL_WINDOW_SIZE, 500)))).body[1]))  # window now -500
        sent.append(len((await p.send(w.window_update(1, 600))).body[1]))  # +100
        return sent

    assert run(go()) == [1000, 1000, 1100]


def test_a_client_that_does_not_read_is_not_read_either() -> None:
    async def go() -> None:
        p = recorder_peer()
        await p.send(w.hello())
        p.conn.pause_writing()
        assert not p.transport.reading
        p.conn.resume_writing()
        assert p.transport.reading

    run(go())


# ---------------------------------------------------------------------- header blocks


def test_a_continuation_flood_is_enhance_your_calm_with_the_block_bounded() -> None:
    async def go() -> tuple[Peer, w.Answers, int]:
        p = recorder_peer()
        await p.send(w.hello(), w.headers(1, w.grpc_headers(RANGE), end_headers=False))
        most = 0
        chunk = w.frame(w.CONTINUATION, 0, 1, b"\x82" * 16_000)
        for _ in range(HEADER_BLOCK_LIMIT // 16_000 + 5):
            a = await p.send(chunk)
            if a.goaway is not None:
                break
            assert p.conn._continuing is not None
            most = max(most, len(p.conn._continuing[2]))
        return p, a, most

    p, a, most = run(go())
    assert goaway_code(a) == w.ENHANCE_YOUR_CALM
    assert most <= HEADER_BLOCK_LIMIT
    assert p.handler.opened == []


def test_empty_continuations_accumulate_nothing_and_the_block_still_opens_its_stream() -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer()
        block = w.headers(1, w.grpc_headers(RANGE), end_headers=False)
        empty = w.frame(w.CONTINUATION, 0, 1)
        await p.send(w.hello(), block, empty * 20_000)
        a = await p.send(w.frame(w.CONTINUATION, w.END_HEADERS, 1))
        return p, a

    p, a = run(go())
    assert a.goaway is None and p.handler.opened == [1]


def test_a_header_block_split_over_continuations_opens_its_stream() -> None:
    async def go() -> Peer:
        p = recorder_peer()
        block = w._encoder.encode(w.grpc_headers(RANGE))
        parts = [block[i : i + 7] for i in range(0, len(block), 7)]
        frames = [w.frame(w.HEADERS, 0, 1, parts[0])]
        frames += [
            w.frame(w.CONTINUATION, w.END_HEADERS if i == len(parts) - 1 else 0, 1, x)
            for i, x in enumerate(parts[1:], 1)
        ]
        await p.send(w.hello(), *frames)
        return p

    p = run(go())
    assert p.handler.opened == [1]


# ---------------------------------------------------------------------- streams


def test_streams_beyond_max_streams_are_refused_and_their_headers_still_decoded() -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer()
        frames = [w.headers(2 * i + 1, w.grpc_headers(RANGE)) for i in range(MAX_STREAMS)]
        await p.send(w.hello(), b"".join(frames))
        over = 2 * MAX_STREAMS + 1
        # The refused block adds an entry to the HPACK table (incremental indexing): the next
        # block refers to it, so the table must have moved on even for a refused stream.
        indexed = b"\x40" + bytes([6]) + b"x-tag1" + bytes([2]) + b"v1"
        refused = w.frame(w.HEADERS, w.END_HEADERS, over, w._encoder.encode(w.grpc_headers(RANGE)) + indexed)
        a = await p.send(refused)
        assert a.resets.get(over) == w.REFUSED_STREAM
        a = await p.send(w.rst_stream(1))  # one ends: there is room again
        a = await p.send(
            w.frame(w.HEADERS, w.END_HEADERS, over + 2, w._encoder.encode(w.grpc_headers(RANGE)) + b"\xbe")
        )
        return p, a

    p, a = run(go())
    assert a.goaway is None and (2 * MAX_STREAMS + 3) not in a.resets
    assert p.handler.opened[-1] == 2 * MAX_STREAMS + 3 and len(p.handler.opened) == MAX_STREAMS + 1
    assert (b"x-tag1", b"v1") in p.conn.streams[2 * MAX_STREAMS + 3].headers
    assert 2 * MAX_STREAMS + 1 not in p.handler.opened


def test_data_after_the_clients_end_stream_is_stream_closed_and_the_handler_told() -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer()
        await p.send(w.hello(), HEADERS_1, w.data(1, b"abc", end=True))
        a = await p.send(w.data(1, b"more"))
        assert await still_answers(p)
        return p, a

    p, a = run(go())
    assert a.resets == {1: w.STREAM_CLOSED}
    assert p.handler.reset == [1] and p.handler.ended == [1]


def test_trailers_after_the_clients_end_stream_are_stream_closed_and_end_it_once() -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer()
        await p.send(w.hello(), w.headers(1, w.grpc_headers(RANGE), end=True))
        a = await p.send(w.headers(1, [(b"x", b"y")], end=True))
        assert await still_answers(p)
        return p, a

    p, a = run(go())
    assert a.resets == {1: w.STREAM_CLOSED}
    assert p.handler.ended == [1] and p.handler.reset == [1]


@pytest.mark.parametrize(
    ("increment", "code"), [(0, w.PROTOCOL_ERROR), ((1 << 31) - 1, w.FLOW_CONTROL_ERROR)], ids=["zero", "overflow"]
)
def test_a_bad_stream_window_update_resets_that_stream_only(increment: int, code: int) -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer()
        await p.send(w.hello(), HEADERS_1)
        a = await p.send(w.window_update(1, increment))
        assert await still_answers(p)
        return p, a

    p, a = run(go())
    assert a.resets == {1: code} and p.handler.reset == [1]


def test_a_window_update_for_a_finished_stream_is_harmless() -> None:
    async def go() -> Peer:
        p = recorder_peer()
        await p.send(w.hello(), HEADERS_1, w.rst_stream(1), w.window_update(1, 100))
        assert await still_answers(p)
        return p

    run(go())


# ---------------------------------------------------------------------- flow control


def test_data_beyond_a_streams_window_resets_it_and_the_connection_goes_on() -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer(consume=False)  # nothing handed on: the window is not given back
        await p.send(w.hello(), HEADERS_1)
        chunk = w.data(1, b"\0" * (1 << 20))
        a = await p.send(chunk * (STREAM_WINDOW >> 20))
        assert a.resets == {}
        a = await p.send(w.data(1, b"x"))
        assert await still_answers(p)
        return p, a

    p, a = run(go())
    assert a.resets == {1: w.FLOW_CONTROL_ERROR}
    assert p.handler.reset == [1]
    # The frame past the window is given back at once; what the handler holds is its to give.
    assert p.conn.recv_window + p.conn.recv_unacked == RECV_WINDOW - STREAM_WINDOW


def test_data_beyond_the_connections_window_is_flow_control_error() -> None:
    async def go() -> w.Answers:
        p = recorder_peer(consume=False)
        streams = RECV_WINDOW // STREAM_WINDOW
        await p.send(w.hello(), *[w.headers(2 * i + 1, w.grpc_headers(RANGE)) for i in range(streams + 1)])
        chunk = b"\0" * (1 << 20)
        for i in range(streams):
            a = await p.send(w.data(2 * i + 1, chunk) * (STREAM_WINDOW >> 20))
            assert a.goaway is None and a.resets == {}
        return await p.send(w.data(2 * streams + 1, b"x"))

    a = run(go())
    assert goaway_code(a) == w.FLOW_CONTROL_ERROR


def test_padding_counts_against_the_window_and_is_given_back() -> None:
    async def go() -> Peer:
        p = recorder_peer(consume=False)
        await p.send(w.hello(), HEADERS_1)
        await p.send(w.frame(w.DATA, w.PADDED, 1, b"\xc8" + b"abc" + b"\0" * 200))
        return p

    p = run(go())
    assert p.handler.received == {1: 3}
    assert p.conn.recv_window == RECV_WINDOW - 204
    assert p.conn.recv_unacked == 201  # the padding and its length byte, given back; the 3 bytes are the handler's


BODY = bytes(range(256)) * 40


def test_our_answers_wait_for_the_clients_windows() -> None:
    """A client that gives no window gets no more DATA than its windows allow, whatever the
    handler sends; its WINDOW_UPDATEs release the rest, in order, and the trailers after."""

    async def go() -> tuple[list[int], w.Answers]:
        p = recorder_peer()
        await p.send(w.hello((w.INITIAL_WINDOW_SIZE, 1000)), HEADERS_1)
        s = p.conn.streams[1]
        s.send_headers([(b":status", b"200")])
        s.send_data(BODY)
        s.send_trailers([(b"grpc-status", b"0")])
        a = await p.flushed()
        sent = [len(a.body[1])]
        assert 1 not in a.ended and s.queued == len(BODY) - 1000
        a = await p.send(w.window_update(1, 4000))
        sent.append(len(a.body[1]))
        assert 1 not in a.ended
        a = await p.send(w.settings((w.INITIAL_WINDOW_SIZE, 100_000)))
        return sent, a

    sent, a = run(go())
    assert sent == [1000, 5000]
    assert bytes(a.body[1]) == BODY and 1 in a.ended
    assert a.header_lists[1][-1] == [(b"grpc-status", b"0")]


def test_our_answers_respect_the_clients_max_frame_size() -> None:
    async def go() -> w.Answers:
        p = recorder_peer()
        await p.send(w.hello((w.INITIAL_WINDOW_SIZE, 1 << 20)), HEADERS_1, w.window_update(0, 1 << 20))
        s = p.conn.streams[1]
        s.send_headers([(b":status", b"200")])
        s.send_data(b"z" * 100_000)
        return await p.flushed()

    a = run(go())
    assert len(a.body[1]) == 100_000
    assert max(len(f.payload) for f in a.of(w.DATA)) <= 1 << 14


# ---------------------------------------------------------------------- half-sent frames


def test_a_half_sent_frame_is_refused_after_the_frame_timeout() -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer(frame_timeout=0.05)
        await p.send(w.hello(), w.data(1, b"x" * 1000)[:500])
        await asyncio.sleep(0.2)
        return p, await p.flushed()

    p, a = run(go())
    assert goaway_code(a) == w.PROTOCOL_ERROR and a.goaway is not None and b"not complete" in a.goaway[2]
    assert p.transport.closed and len(p.conn.buf) == 0


def test_idling_between_frames_and_a_pause_we_asked_for_are_not_timed_out() -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = recorder_peer(frame_timeout=0.05)
        await p.send(w.hello(), HEADERS_1)
        await asyncio.sleep(0.15)  # between frames: idle as long as it likes
        await p.send(w.ping()[:5])
        p.conn.pause_writing()  # we stopped reading it: its frame cannot be finished
        await asyncio.sleep(0.15)
        p.conn.resume_writing()
        return p, await p.send(w.ping()[5:])

    p, a = run(go())
    assert a.goaway is None and not p.transport.closed and len(a.of(w.PING)) == 1


def test_a_trickled_frame_is_timed_from_its_first_byte() -> None:
    async def go() -> w.Answers:
        p = recorder_peer(frame_timeout=0.1)
        await p.send(w.hello())
        frame = w.data(1, b"y" * 100)
        for i in range(len(frame)):  # one byte every 10 ms: never done within 0.1 s
            await p.send(frame[i : i + 1])
            if p.transport.closed:
                break
            await asyncio.sleep(0.01)
        return await p.flushed()

    a = run(go())
    assert goaway_code(a) == w.PROTOCOL_ERROR


# ---------------------------------------------------------------------- gRPC calls


class StreamRecorder:
    """A streaming handler: answers each message with an empty response, notes the rest."""

    log: list[tuple[str, int]] = []

    def __init__(self, call: Call) -> None:
        self.call = call

    def message(self, msg: Any) -> None:
        self.call.send(self.call.route.method.response())

    def half_closed(self) -> None:
        self.log.append(("half_closed", self.call.stream.id))

    def cancelled(self) -> None:
        self.log.append(("cancelled", self.call.stream.id))


def _reply(call: Call, msg: Any) -> None:
    """Answered on the next loop turn, as the member's handlers answer (after an await)."""
    asyncio.get_running_loop().call_soon(call.reply, call.route.method.response())


def _routes() -> dict[bytes, Route]:
    routes = {}
    for methods in SERVICES.values():
        for m in methods.values():
            streams = m.client_streaming or m.server_streaming
            routes[m.path.encode()] = Route(m, streaming=StreamRecorder) if streams else Route(m, unary=_reply)
    return routes


ROUTES = _routes()


def grpc_peer() -> Peer:
    return Peer(lambda c: GrpcHandler(c, ROUTES, MAX_MESSAGE))


async def grpc_call(frames: bytes, sid: int = 1, timeout: float = 2.0) -> tuple[Peer, w.Answers]:
    p = grpc_peer()
    await p.send(w.hello(), frames)
    for _ in range(int(timeout / 0.01)):
        a = await p.flushed()
        if a.done(sid):
            break
        await asyncio.sleep(0.01)
    return p, a


def call_status(frames: bytes, sid: int = 1) -> tuple[int, str] | None:
    answers: w.Answers = run(grpc_call(frames, sid))[1]
    return answers.status(sid)


def test_a_good_call_is_answered() -> None:
    _p, a = run(grpc_call(w.unary(1, RANGE, pb.RangeRequest(key=b"k").SerializeToString())))
    assert a.status(1) == (w.GRPC_OK, "") and a.messages(1) == [b""]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/etcdserverpb.KV/Nope", "unknown method Nope for service etcdserverpb.KV"),
        ("/etcdserverpb.Nope/Range", "unknown service etcdserverpb.Nope"),
        ("/nothing", 'malformed method name: "/nothing"'),
    ],
)
def test_an_unknown_method_is_unimplemented_in_grpc_gos_words(path: str, says: str) -> None:
    assert call_status(w.unary(1, path, b"")) == (w.UNIMPLEMENTED, says)


def test_a_request_that_is_not_grpc_is_415() -> None:
    _p, a = run(grpc_call(w.headers(1, [(b":method", b"GET"), (b":path", RANGE.encode())], end=True)))
    assert a.http_status(1) == b"415" and 1 in a.ended


def test_an_encoding_we_do_not_offer_is_unimplemented() -> None:
    frames = w.headers(1, w.grpc_headers(RANGE, (b"grpc-encoding", b"gzip"))) + w.data(1, w.grpc_message(b""), end=True)
    assert call_status(frames) == (
        w.UNIMPLEMENTED,
        'grpc: Decompressor is not installed for grpc-encoding "gzip"',
    )


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        (1, "grpc: compressed flag set with identity or empty encoding"),
        (7, "grpc: received unexpected payload format 7"),
    ],
)
def test_a_message_flagged_compressed_is_internal(flag: int, says: str) -> None:
    msg = bytes((flag,)) + w.grpc_message(b"\x0a\x01k")[1:]
    assert call_status(w.headers(1, w.grpc_headers(RANGE)) + w.data(1, msg, end=True)) == (w.INTERNAL, says)


def test_a_message_over_the_limit_is_resource_exhausted_and_its_bytes_dropped_as_they_come() -> None:
    async def go() -> tuple[Peer, w.Answers]:
        size = 50 << 20
        p, a = await grpc_call(w.headers(1, w.grpc_headers(RANGE)) + w.data(1, struct.pack(">BI", 0, size)))
        assert a.status(1) == (
            w.RESOURCE_EXHAUSTED,
            f"grpc: received message larger than max ({size} vs. {MAX_MESSAGE})",
        )
        # The client goes on sending it (it may: we gave the window): dropped, never buffered,
        # and the connection's window comes back; another call on the connection is answered.
        for _ in range(24):
            await p.send(w.data(1, b"\0" * (1 << 20)))
        a = await p.send(w.unary(3, RANGE, b""))
        return p, a

    p, a = run(go())
    assert a.goaway is None and a.status(3) == (w.GRPC_OK, "")
    assert p.conn.recv_window + p.conn.recv_unacked >= RECV_WINDOW - 16  # all of it given back
    assert len(p.conn.buf) == 0


@pytest.mark.parametrize("how", ["RST_STREAM", "END_STREAM inside the message", "deadline"])
def test_calls_that_end_inside_a_message_give_its_bytes_back_to_the_connection_window(how: str) -> None:
    """Each call that ended halfway through a 30 kB message used to keep those 30 kB of the
    connection's receive window for good: after 550 of them (say, a client whose deadlines
    fire during uploads) the connection could take no more DATA at all."""

    async def go() -> tuple[Peer, w.Answers]:
        p = grpc_peer()
        await p.send(w.hello())
        half = struct.pack(">BI", 0, 60_000) + b"\0" * 30_000
        for i in range(550):  # 16.5 MB in all: more than the connection's window
            sid = 2 * i + 1
            timeout = [(b"grpc-timeout", b"1n")] if how == "deadline" else []
            frames = [w.headers(sid, w.grpc_headers(RANGE, *timeout)), w.data(sid, half)]
            if how == "RST_STREAM":
                frames.append(w.rst_stream(sid))
            elif how == "END_STREAM inside the message":
                frames.append(w.data(sid, b"", end=True))
            a = await p.send(*frames)
            assert a.goaway is None, (i, a.goaway)
            assert how == "RST_STREAM" or a.status(sid) is not None
        a = await p.send(w.unary(1101, RANGE, b""))
        return p, a

    p, a = run(go())
    assert a.goaway is None and a.status(1101) == (w.GRPC_OK, "")
    assert p.conn.recv_window + p.conn.recv_unacked == RECV_WINDOW


def test_bytes_that_do_not_parse_are_invalid_argument_and_other_calls_go_on() -> None:
    async def go() -> w.Answers:
        _p, a = await grpc_call(w.unary(1, RANGE, b"\xff\xff\xff") + w.unary(3, RANGE, b""), sid=3)
        return a

    a = run(go())
    status = a.status(1)
    assert status is not None and status[0] == w.INVALID_ARGUMENT
    assert status[1].startswith("grpc: error unmarshalling request: ")
    assert a.status(3) == (w.GRPC_OK, "")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (w.grpc_message(b"") * 2, "grpc: a unary call with more than one request message"),
        (struct.pack(">BI", 0, 10) + b"abc", "grpc: the request ended inside a message"),
        (b"", "grpc: a unary call without its request message"),
    ],
    ids=["two messages", "ended inside a message", "no message"],
)
def test_a_unary_call_without_exactly_one_message_is_internal(body: bytes, says: str) -> None:
    frames = w.headers(1, w.grpc_headers(RANGE)) + w.data(1, body, end=True)
    assert call_status(frames) == (w.INTERNAL, says)


def test_a_call_past_its_grpc_timeout_is_deadline_exceeded() -> None:
    frames = w.headers(1, w.grpc_headers(RANGE, (b"grpc-timeout", b"20m")))  # and never its message
    assert call_status(frames) == (w.DEADLINE_EXCEEDED, "context deadline exceeded")


def test_a_malformed_grpc_timeout_is_internal() -> None:
    frames = w.headers(1, w.grpc_headers(RANGE, (b"grpc-timeout", b"soon")), end=True)
    assert call_status(frames) == (w.INTERNAL, 'malformed grpc-timeout: "soon"')


@pytest.mark.parametrize(
    "ending",
    [
        w.data(1, w.grpc_message(b"\xff\xff"), end=False),  # unparsable
        w.data(1, struct.pack(">BI", 0, MAX_MESSAGE + 1)),  # too large
        w.data(1, struct.pack(">BI", 1, 0)),  # compressed
        w.rst_stream(1),
        w.data(1, b"", end=True) + w.data(1, b"late"),  # DATA after END_STREAM
        b"",  # the connection goes
    ],
    ids=["unparsable", "too large", "compressed", "RST_STREAM", "DATA after END_STREAM", "connection lost"],
)
def test_a_streaming_handler_is_told_whenever_its_call_ends(ending: bytes) -> None:
    """A Watch call's watches live in its handler: however the call ends, the handler hears."""

    async def go() -> None:
        StreamRecorder.log = []
        p = grpc_peer()
        await p.send(w.hello(), w.headers(1, w.grpc_headers(WATCH)), w.data(1, w.grpc_message(b"")))
        if ending:
            await p.send(ending)
        else:
            p.lose()
        await p.flushed()

    run(go())
    assert ("cancelled", 1) in StreamRecorder.log


def test_a_streaming_call_past_its_deadline_tells_its_handler_once() -> None:
    async def go() -> w.Answers:
        StreamRecorder.log = []
        _p, a = await grpc_call(w.headers(1, w.grpc_headers(WATCH, (b"grpc-timeout", b"20m"))))
        return a

    a = run(go())
    assert a.status(1) == (w.DEADLINE_EXCEEDED, "context deadline exceeded")
    assert StreamRecorder.log == [("cancelled", 1)]


# ---------------------------------------------------------------------- fuzz

METHODS = sorted(m.path for methods in SERVICES.values() for m in methods.values())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(METHODS), body=st.binary(max_size=200), chunks=st.integers(1, 50), end=st.booleans())
def test_any_message_body_gets_a_status_or_an_answer_and_other_calls_go_on(
    path: str, body: bytes, chunks: int, end: bool
) -> None:
    async def go() -> w.Answers:
        p = grpc_peer()
        msg = w.grpc_message(body)
        pieces = [msg[i : i + chunks] for i in range(0, len(msg), chunks)]
        frames = [w.headers(1, w.grpc_headers(path))] + [w.data(1, x) for x in pieces] + [w.data(1, b"", end=end)]
        await p.send(w.hello(), *frames)
        return await p.send(w.unary(3, RANGE, b""))

    a = run(go())
    assert a.goaway is None
    assert a.status(3) == (w.GRPC_OK, "")
    status = a.status(1)
    if status is not None:
        assert status[0] in (w.GRPC_OK, w.INVALID_ARGUMENT, w.INTERNAL), status
        assert status[0] != w.INTERNAL or "unary call" in status[1] or "inside a message" in status[1], status


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(w.frames([RANGE, WATCH]), max_size=12), cuts=st.lists(st.integers(0, 2000), max_size=4))
def test_any_frame_sequence_is_answered_or_goes_away_and_never_raises(frames: list[bytes], cuts: list[int]) -> None:
    async def go() -> tuple[Peer, w.Answers]:
        p = grpc_peer()
        wire = w.hello() + b"".join(frames)
        points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
        for a, b in itertools.pairwise(points):
            p.conn.data_received(wire[a:b])  # raises nothing, however the bytes are cut
        answers = await p.flushed()
        if answers.goaway is None:
            assert await still_answers(p) or p.conn._continuing is not None
        p.lose()
        return p, await p.flushed()

    p, a = run(go())
    if a.goaway is not None:
        assert a.goaway[1] in (
            w.PROTOCOL_ERROR,
            w.FLOW_CONTROL_ERROR,
            w.FRAME_SIZE_ERROR,
            w.COMPRESSION_ERROR,
            w.ENHANCE_YOUR_CALM,
        )
    for code in a.resets.values():
        assert code in (w.PROTOCOL_ERROR, w.FLOW_CONTROL_ERROR, w.STREAM_CLOSED, w.REFUSED_STREAM, w.CANCEL)
    assert p.conn.streams == {}


def test_constants_are_rfc_9113s() -> None:
    """The server's frame and error numbers are the RFC's (written out in h2wire.py)."""
    assert (http2.DATA, http2.CONTINUATION, http2.GOAWAY) == (w.DATA, w.CONTINUATION, w.GOAWAY)
    assert (http2.REFUSED_STREAM, http2.ENHANCE_YOUR_CALM, http2.FLOW_CONTROL_ERROR) == (
        w.REFUSED_STREAM,
        w.ENHANCE_YOUR_CALM,
        w.FLOW_CONTROL_ERROR,
    )


def test_rapid_reset_buys_no_more_work_than_max_streams() -> None:
    """Opening a call and resetting it at once frees its stream, not its work (a Range waiting
    for its read goes on): a connection with MAX_STREAMS calls' work still running gets
    REFUSED_STREAM however few streams it has open, until some of that work ends."""

    async def go() -> tuple[w.Answers, w.Answers, Peer]:
        p = recorder_peer()
        frames = []
        for i in range(MAX_STREAMS):
            frames.append(w.headers(2 * i + 1, w.grpc_headers(RANGE)))
            frames.append(w.rst_stream(2 * i + 1))
        await p.send(w.hello(), b"".join(frames))
        p.conn.working = MAX_STREAMS  # as EtcdApi counts the tasks those calls started
        over = 2 * MAX_STREAMS + 1
        refused = await p.send(w.headers(over, w.grpc_headers(RANGE)))
        p.conn.working -= 1  # one call's work ends
        taken = await p.send(w.headers(over + 2, w.grpc_headers(RANGE)))
        return refused, taken, p

    refused, taken, p = run(go())
    assert list(p.conn.streams) == [2 * MAX_STREAMS + 3]  # every reset one is gone
    assert refused.resets.get(2 * MAX_STREAMS + 1) == w.REFUSED_STREAM
    assert (2 * MAX_STREAMS + 3) not in taken.resets and p.handler.opened[-1] == 2 * MAX_STREAMS + 3


def test_the_watch_calls_of_a_connection_share_its_unsent_bytes_and_its_watch_limit() -> None:
    """kube-apiserver opens one Watch call per resource on one connection.  Each call used to
    count everything the connection had not sent as its own backlog, so four calls catching up
    at once looked four times over their limit and a connection that read was cut off.  Now
    the calls' backlogs add up to what the connection owes, once; and the connection's watches
    are counted together against MAX_WATCHES_PER_CONNECTION."""
    from store.etcdapi.watch import WatchCall
    from store.mvcc.kvstore import KVStore
    from store.server.state import ReplicatedState
    from store.server.watch_streams import WatchStreams
    from store.watch.hub import WatchHub

    kv = KVStore()
    header = lambda: [1, 1, kv.revision, 1]  # noqa: E731
    calls: list[WatchCall] = []

    def watch_call(call: Call) -> WatchCall:
        streams = WatchStreams(ReplicatedState(1, 1, {}, kv, WatchHub(kv)), header, 1.0, 16 << 20, 1 << 30)
        calls.append(WatchCall(call, streams, header, fragment_bytes=0))
        return calls[-1]

    def creates(sid: int, n: int) -> bytes:
        req = pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"k"))
        return w.data(sid, w.grpc_message(req.SerializeToString()) * n)

    routes = {WATCH.encode(): Route(SERVICES["Watch"]["Watch"], streaming=watch_call)}

    async def go() -> None:
        p = Peer(lambda c: GrpcHandler(c, routes, MAX_MESSAGE))
        await p.send(w.hello(), *(w.headers(sid, w.grpc_headers(WATCH)) for sid in (1, 3, 5, 7)))
        assert len(calls) == 4
        p.transport.unsent = 8 << 20
        assert [c.backlog() for c in calls] == [2 << 20] * 4
        await p.send(*(creates(sid, n) for sid, n in ((1, 1), (3, 2), (5, 3), (7, 4))))
        assert [len(c.watches) for c in calls] == [1, 2, 3, 4]
        assert {c.connection_watches() for c in calls} == {10}
        await p.send(w.rst_stream(7))  # a call ends: the rest share what is left
        assert [c.backlog() for c in calls[:3]] == [(8 << 20) // 3] * 3
        assert {c.connection_watches() for c in calls[:3]} == {6}
        other = Peer(lambda c: GrpcHandler(c, routes, MAX_MESSAGE))  # another connection: its own
        await other.send(w.hello(), w.headers(1, w.grpc_headers(WATCH)), creates(1, 1))
        assert calls[4].backlog() == 0 and calls[4].connection_watches() == 1

    run(go())
