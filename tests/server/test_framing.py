"""Frames on the wire: round trips, batching, and a typed error for anything else."""

from __future__ import annotations

import asyncio
import struct

import pytest

from store.api.errors import ProtocolError
from store.api.framing import FrameReader, encode_frame, encode_frames, read_frame


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
