"""Frames on the wire: round trips, batching, and a typed error for anything else."""

from __future__ import annotations

import asyncio
import itertools
import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.api.errors import ProtocolError
from store.api.framing import HEADER, FrameReader, encode_frame, encode_frames, read_frame


def _reader(data: bytes) -> asyncio.StreamReader:
    r = asyncio.StreamReader()
    r.feed_data(data)
    r.feed_eof()
    return r


async def _all(data: bytes, max_frame: int = 1 << 20) -> list[object]:
    fr = FrameReader(_reader(data), max_frame=max_frame)
    out: list[object] = []
    while batch := await fr.frames():
        out += batch
    return out


def test_round_trip_of_many_frames() -> None:
    """Frames written one by one or as a batch decode to the same objects, in order."""
    objs = [[1, "put", [b"k", b"v"]], {"a": 1}, b"\x00" * 1000, "text"]
    data = b"".join(encode_frame(o) for o in objs)
    assert data == encode_frames(objs)
    assert asyncio.run(_all(data)) == objs


def test_sized_frames_report_encoded_size() -> None:
    """The size reported with a frame is its encoded body length (used for request limits)."""

    async def go() -> list[tuple[object, int]]:
        return await FrameReader(_reader(encode_frame(b"x" * 100))).sized_frames()

    [(obj, size)] = asyncio.run(go())
    assert obj == b"x" * 100 and size == len(encode_frame(b"x" * 100)) - 4


def test_oversized_length_is_refused_before_reading() -> None:
    """A length prefix above the limit is a ProtocolError naming both sizes."""
    with pytest.raises(ProtocolError, match="exceeds the 1024-byte limit"):
        asyncio.run(_all(struct.pack(">I", 5000) + b"x" * 10, max_frame=1024))


def test_garbage_body_is_a_protocol_error() -> None:
    """Bytes that are not msgpack inside a well-formed frame: ProtocolError."""
    with pytest.raises(ProtocolError, match="undecodable frame"):
        asyncio.run(_all(struct.pack(">I", 3) + b"\xc1\xc1\xc1"))


def test_eof_inside_a_frame_is_a_protocol_error() -> None:
    """A connection that closes halfway through a frame is reported, not ignored."""
    data = encode_frame([1, 2, 3])[:-1]
    with pytest.raises(ProtocolError, match="inside a frame"):
        asyncio.run(_all(data))


def test_read_frame_single() -> None:
    """read_frame reads exactly one frame."""

    async def go() -> object:
        return await read_frame(_reader(encode_frame([7, "x"]) + encode_frame(1)))

    assert asyncio.run(go()) == [7, "x"]


# ---------------------------------------------------------------------- frame_timeout
def _open_reader(timeout: float) -> tuple[asyncio.StreamReader, FrameReader]:
    r = asyncio.StreamReader()
    return r, FrameReader(r, max_frame=1 << 20, skip_oversized=True, frame_timeout=timeout)


def test_a_frame_left_half_sent_is_a_protocol_error_after_the_frame_timeout() -> None:
    async def go() -> float:
        r, fr = _open_reader(0.2)
        r.feed_data(encode_frame([1, "range", [b"k" * 100]])[:50])
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(ProtocolError, match=r"not complete 0\.2s after its first byte .*frame_timeout"):
            await asyncio.wait_for(fr.frames(), 5)
        return loop.time() - t0

    assert 0.15 < asyncio.run(go()) < 1.0


def test_a_frame_trickled_in_slower_than_the_timeout_is_refused_though_bytes_keep_coming() -> None:
    """The timeout runs from a frame's first byte, not from the last read: one byte every
    50 ms does not keep a frame open forever."""

    async def go() -> None:
        r, fr = _open_reader(0.3)
        data = encode_frame([1, "range", [b"k" * 100]])

        async def trickle() -> None:
            for i in range(len(data)):
                r.feed_data(data[i : i + 1])
                await asyncio.sleep(0.05)

        t = asyncio.create_task(trickle())
        try:
            with pytest.raises(ProtocolError, match="not complete"):
                await asyncio.wait_for(fr.frames(), 5)
        finally:
            t.cancel()

    asyncio.run(go())


def test_idle_between_frames_is_fine_and_each_frame_gets_its_own_time() -> None:
    """Silence between frames is never timed out (watches and keepalives idle), and a frame
    begun right after another is timed from its own first byte."""

    async def go() -> list[object]:
        r, fr = _open_reader(0.3)
        one, two = encode_frame([1, "a", []]), encode_frame([2, "b", []])
        r.feed_data(one)
        got: list[object] = list(await fr.frames())
        waiting = asyncio.ensure_future(fr.frames())
        await asyncio.sleep(0.6)  # twice the timeout with nothing on the wire
        assert not waiting.done()
        r.feed_data(one + two[:5])  # a frame, and the start of the next one
        got += await waiting
        await asyncio.sleep(0.2)
        r.feed_data(two[5:])  # 0.2 s after it began: in time
        got += await asyncio.wait_for(fr.frames(), 5)
        return got

    assert asyncio.run(go()) == [[1, "a", []], [1, "a", []], [2, "b", []]]


def test_an_oversized_body_that_stops_coming_is_timed_out_too() -> None:
    async def go() -> None:
        r, fr = _open_reader(0.2)
        r.feed_data(struct.pack(">I", 8 << 20) + b"\x93\x05\xa3put" + b"\x00" * 1000)
        (first,) = await fr.frames()  # the oversized frame is answered at once...
        assert first.request_id == 5
        with pytest.raises(ProtocolError, match="not complete"):  # ...but the rest must come
            await asyncio.wait_for(fr.frames(), 5)

    asyncio.run(go())


_objs = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=64) | st.text(max_size=16),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(objs=st.lists(_objs, min_size=1, max_size=8), cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_frames_cut_anywhere_decode_alike_under_a_frame_timeout(objs: list[object], cuts: list[int]) -> None:
    """However the bytes of a frame stream are cut into reads, a reader with a frame timeout
    yields the same frames as a whole read would (the timeout never fires on bytes that come)."""
    data = encode_frames(objs)
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})

    async def go() -> list[object]:
        r, fr = _open_reader(5.0)
        out: list[object] = []
        for a, b in itertools.pairwise(points):
            r.feed_data(data[a:b])
            await asyncio.sleep(0)
        r.feed_eof()
        while batch := await asyncio.wait_for(fr.frames(), 5):
            out += batch
        return out

    assert asyncio.run(go()) == objs


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=300))
def test_any_bytes_then_silence_end_in_frames_or_a_protocol_error_never_a_hang(data: bytes) -> None:
    """Arbitrary bytes followed by silence: complete frames come out, and what is left over is
    refused (undecodable, or not complete within the frame timeout); nothing waits forever."""

    async def go() -> None:
        r, fr = _open_reader(0.05)
        r.feed_data(data)
        try:
            while True:
                waiting = asyncio.ensure_future(fr.frames())
                done, _ = await asyncio.wait({waiting}, timeout=0.2)
                if not done:  # only allowed between frames: nothing was left over
                    waiting.cancel()
                    assert fr.pos == len(fr.buf) and not fr._skip
                    return
                waiting.result()
        except ProtocolError:
            return

    asyncio.run(go())


def test_the_reused_packer_recovers_from_an_object_it_cannot_pack() -> None:
    """encode_frame reuses one Packer per thread: a failed pack leaves nothing behind for the next."""
    with pytest.raises(TypeError):
        encode_frame([1, object()])
    frame = encode_frame([2, "ok"])
    assert msgpack.unpackb(frame[HEADER.size :], raw=False) == [2, "ok"]
