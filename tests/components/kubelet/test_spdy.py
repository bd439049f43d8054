"""SPDY/3 as port-forward uses it: frames survive any split of the byte stream, header blocks
share one compressor per direction, and what a hostile peer sends gets a SpdyError."""

from __future__ import annotations

import contextlib
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet import spdy
from components.kubelet.spdy import Decoder, Encoder, SpdyError

HEADERS = {"streamtype": "error", "port": "8080", "requestid": "0"}


def _stream(encoder: Encoder) -> bytes:
    return b"".join(
        [
            encoder.syn_stream(1, HEADERS),
            Encoder.data(1, fin=True),
            encoder.syn_stream(3, {**HEADERS, "streamtype": "data"}),
            Encoder.data(3, b"GET / HTTP/1.0\r\n\r\n"),
            encoder.ping(1),
            encoder.rst_stream(3, spdy.CANCEL),
            encoder.goaway(3),
        ]
    )


def _kinds(frames: list[spdy.Frame]) -> list[tuple[int, int]]:
    return [(f.kind, f.stream_id) for f in frames]


EXPECTED = [(1, 1), (0, 1), (1, 3), (0, 3), (spdy.PING, 0), (spdy.RST_STREAM, 3), (spdy.GOAWAY, 3)]


def test_frames_round_trip() -> None:
    frames = Decoder().feed(_stream(Encoder()))
    assert _kinds(frames) == EXPECTED
    assert frames[0].headers == HEADERS and frames[2].headers["streamtype"] == "data"
    assert frames[1].fin and frames[1].data == b""
    assert frames[3].data == b"GET / HTTP/1.0\r\n\r\n" and not frames[3].fin
    assert frames[4].raw == struct.pack(">HHII", 0x8003, spdy.PING, 4, 1)  # echoed as is
    assert frames[5].status == spdy.CANCEL


@settings(max_examples=50)
@given(st.lists(st.integers(min_value=1, max_value=40), max_size=40))
def test_any_split_of_the_stream_gives_the_same_frames(cuts: list[int]) -> None:
    """kubectl's framer writes each field as its own WebSocket message."""
    data = _stream(Encoder())
    decoder, frames, at = Decoder(), [], 0
    for n in cuts:
        frames += decoder.feed(data[at : at + n])
        at += n
    frames += decoder.feed(data[at:])
    assert _kinds(frames) == EXPECTED


def test_the_first_header_block_uses_the_spdy3_dictionary() -> None:
    frame = Encoder().syn_reply(2)
    block = frame[12:]
    assert block[:2] == b"\x78\xf9" and block[2:6] == struct.pack(">I", zlib.adler32(spdy.DICTIONARY))
    assert zlib.adler32(spdy.DICTIONARY) == 0xE3C6A7C2


def test_settings_headers_and_window_updates_are_read_and_dropped() -> None:
    settings_frame = struct.pack(">HHI", 0x8003, spdy.SETTINGS, 12) + struct.pack(">III", 1, 7, 65536)
    window = struct.pack(">HHI", 0x8003, spdy.WINDOW_UPDATE, 8) + struct.pack(">II", 1, 1000)
    encoder = Encoder()
    headers = encoder._control(spdy.HEADERS, 0, struct.pack(">I", 1) + encoder._compressed({"a": "b"}))
    later = encoder.syn_stream(5, HEADERS)
    assert _kinds(Decoder().feed(settings_frame + window + headers + later)) == [(1, 5)]


def _control(kind: int, body: bytes, flags: int = 0, version: int = 3) -> bytes:
    return struct.pack(">HHI", 0x8000 | version, kind, (flags << 24) | len(body)) + body


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (_control(spdy.SYN_STREAM, b"", version=2), "version 2"),
        (_control(5, b""), "unknown control frame type 5"),
        (_control(spdy.SYN_STREAM, b"\x00" * 4), "shorter than 10"),
        (_control(spdy.SYN_STREAM, struct.pack(">IIBB", 1, 0, 0, 0) + b"junk"), "does not decompress"),
        (_control(spdy.RST_STREAM, b"\x00" * 4), "8 bytes"),
        (_control(spdy.RST_STREAM, b"\x00" * 8), "stream id 0"),
        (_control(spdy.PING, b"\x00" * 5), "4 bytes"),
        (struct.pack(">II", 0, 1) + b"x", "stream 0"),
        (struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, spdy.MAX_FRAME + 1), "over the"),
    ],
)
def test_bad_frames_are_refused_naming_why(data: bytes, why: str) -> None:
    with pytest.raises(SpdyError, match=why):
        Decoder().feed(data)


def _raw_block(pairs: list[tuple[bytes, bytes]], count: int | None = None) -> bytes:
    out = struct.pack(">I", len(pairs) if count is None else count)
    for name, value in pairs:
        out += struct.pack(">I", len(name)) + name + struct.pack(">I", len(value)) + value
    return out


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"\x00", "pair count"),
        (_raw_block([], count=spdy.MAX_PAIRS + 1), "at most"),
        (_raw_block([(b"a", b"1")], count=2), "ends inside a pair"),
        (_raw_block([(b"Port", b"1")]), "lowercase"),
        (_raw_block([(b"a", b"1"), (b"a", b"2")]), "repeated"),
        (_raw_block([(b"", b"1")]), "empty"),
        (_raw_block([(b"a", b"1")]) + b"x", "after the last"),
    ],
)
def test_bad_header_blocks_are_refused(raw: bytes, why: str) -> None:
    with pytest.raises(SpdyError, match=why):
        spdy.parse_header_block(raw)


def test_a_header_block_that_inflates_past_the_limit_is_refused() -> None:
    encoder = Encoder()
    block = encoder._compressed({"a": "x" * spdy.MAX_HEADER_BLOCK})
    huge = encoder._control(spdy.SYN_STREAM, 0, struct.pack(">IIBB", 1, 0, 0, 0) + block)
    with pytest.raises(SpdyError, match="over"):
        Decoder().feed(huge)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_any_bytes_give_frames_or_a_spdy_error(data: bytes) -> None:
    with contextlib.suppress(SpdyError):
        Decoder().feed(data)
