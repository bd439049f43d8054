"""SPDY/3 framing, as kubectl's port-forward speaks it through a WebSocket tunnel.

Only what port-forward uses: SYN_STREAM and SYN_REPLY with zlib-compressed header blocks (one
compressor per direction for the whole connection, flushed after each block, primed with the
SPDY/3 dictionary), DATA with FIN, RST_STREAM, PING (echoed) and GOAWAY; SETTINGS, HEADERS and
WINDOW_UPDATE are read and dropped, as kube's own SPDY library does (it does no flow control).
`Decoder` takes bytes in whatever pieces they arrive and gives whole frames; everything a peer
sends is bounded (frame size, header block size, pair count) and a violation is a SpdyError.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, CANCEL, INTERNAL_ERROR = 1, 2, 3, 5, 6
MAX_FRAME = 1 << 20  # kubectl sends at most 32 KiB of data per frame
MAX_HEADER_BLOCK = 64 * 1024  # decompressed
MAX_PAIRS = 64

DICTIONARY = (  # the SPDY/3 header compression dictionary (a protocol constant; adler32 0xe3c6a7c2)
    b"\x00\x00\x00\x07options\x00\x00\x00\x04head\x00\x00\x00\x04post\x00"
    b"\x00\x00\x03put\x00\x00\x00\x06delete\x00\x00\x00\x05trace\x00\x00\x00"
    b"\x06accept\x00\x00\x00\x0eaccept-charset\x00\x00\x00\x0faccept-encodin"
    b"g\x00\x00\x00\x0faccept-language\x00\x00\x00\raccept-ranges\x00\x00"
    b"\x00\x03age\x00\x00\x00\x05allow\x00\x00\x00\rauthorization\x00\x00"
    b"\x00\rcache-control\x00\x00\x00\nconnection\x00\x00\x00\x0ccontent-bas"
    b"e\x00\x00\x00\x10content-encoding\x00\x00\x00\x10content-language\x00"
    b"\x00\x00\x0econtent-length\x00\x00\x00\x10content-location\x00\x00\x00"
    b"\x0bcontent-md5\x00\x00\x00\rcontent-range\x00\x00\x00\x0ccontent-type"
    b"\x00\x00\x00\x04date\x00\x00\x00\x04etag\x00\x00\x00\x06expect\x00\x00"
    b"\x00\x07expires\x00\x00\x00\x04from\x00\x00\x00\x04host\x00\x00\x00"
    b"\x08if-match\x00\x00\x00\x11if-modified-since\x00\x00\x00\rif-none-mat"
    b"ch\x00\x00\x00\x08if-range\x00\x00\x00\x13if-unmodified-since\x00\x00"
    b"\x00\rlast-modified\x00\x00\x00\x08location\x00\x00\x00\x0cmax-forward"
    b"s\x00\x00\x00\x06pragma\x00\x00\x00\x12proxy-authenticate\x00\x00\x00"
    b"\x13proxy-authorization\x00\x00\x00\x05range\x00\x00\x00\x07referer"
    b"\x00\x00\x00\x0bretry-after\x00\x00\x00\x06server\x00\x00\x00\x02te"
    b"\x00\x00\x00\x07trailer\x00\x00\x00\x11transfer-encoding\x00\x00\x00"
    b"\x07upgrade\x00\x00\x00\nuser-agent\x00\x00\x00\x04vary\x00\x00\x00"
    b"\x03via\x00\x00\x00\x07warning\x00\x00\x00\x10www-authenticate\x00\x00"
    b"\x00\x06method\x00\x00\x00\x03get\x00\x00\x00\x06status\x00\x00\x00"
    b"\x06200 OK\x00\x00\x00\x07version\x00\x00\x00\x08HTTP/1.1\x00\x00\x00"
    b"\x03url\x00\x00\x00\x06public\x00\x00\x00\nset-cookie\x00\x00\x00\nkee"
    b"p-alive\x00\x00\x00\x06origin10010120120220520630030230330430530630740"
    b"2405406407408409410411412413414415416417502504505203 Non-Authoritative"
    b" Information204 No Content301 Moved Permanently400 Bad Request401 Unau"
    b"thorized403 Forbidden404 Not Found500 Internal Server Error501 Not Imp"
    b"lemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oc"
    b"t Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/"
    b"html,image/png,image/jpg,image/gif,application/xml,application/xhtml+x"
    b"ml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchch"
    b"arset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)


class SpdyError(ValueError):
    """A frame kube's SPDY library would not send; the connection ends with it."""


@dataclass(frozen=True, slots=True)
class Frame:
    kind: int  # a control type, or 0 for DATA
    stream_id: int = 0
    flags: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    data: bytes = b""
    status: int = 0  # RST_STREAM's and GOAWAY's
    raw: bytes = b""  # a PING as received (the answer is the same frame)

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


DATA = 0


class Decoder:
    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if length > MAX_FRAME:
                raise SpdyError(f"a frame of {length} bytes is over the {MAX_FRAME}-byte limit")
            if len(self._buffer) < 8 + length:
                break
            head, body = bytes(self._buffer[:8]), bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            frame = self._frame(head, body)
            if frame is not None:
                frames.append(frame)
        return frames

    def _frame(self, head: bytes, body: bytes) -> Frame | None:
        first, second = struct.unpack(">HH", head[:4])
        flags = head[4]
        if not first & 0x8000:
            stream_id = ((first & 0x7FFF) << 16) | second
            if stream_id == 0:
                raise SpdyError("a DATA frame on stream 0")
            return Frame(DATA, stream_id, flags, data=body)
        version, kind = first & 0x7FFF, second
        if version != VERSION:
            raise SpdyError(f"SPDY version {version}; this server speaks 3")
        if kind == SYN_STREAM:
            if len(body) < 10:
                raise SpdyError("a SYN_STREAM shorter than 10 bytes")
            stream_id = _stream_id(body)
            return Frame(SYN_STREAM, stream_id, flags, headers=self._headers(body[10:]))
        if kind in (SYN_REPLY, HEADERS):
            if len(body) < 4:
                raise SpdyError("a SYN_REPLY or HEADERS shorter than 4 bytes")
            self._headers(body[4:])  # keeps the shared decompressor in step
            return None if kind == HEADERS else Frame(SYN_REPLY, _stream_id(body), flags)
        if kind == RST_STREAM:
            if len(body) != 8:
                raise SpdyError("a RST_STREAM must be 8 bytes")
            return Frame(RST_STREAM, _stream_id(body), flags, status=int.from_bytes(body[4:8], "big"))
        if kind == PING:
            if len(body) != 4:
                raise SpdyError("a PING must be 4 bytes")
            return Frame(PING, flags=flags, raw=head + body)
        if kind == GOAWAY:
            if len(body) != 8:
                raise SpdyError("a GOAWAY must be 8 bytes")
            return Frame(GOAWAY, _stream_id(body), status=int.from_bytes(body[4:8], "big"))
        if kind in (SETTINGS, WINDOW_UPDATE):
            return None
        raise SpdyError(f"unknown control frame type {kind}")

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BLOCK)
        except zlib.error as e:
            raise SpdyError(f"a header block does not decompress: {e}") from None
        if self._inflate.unconsumed_tail:
            raise SpdyError(f"a header block is over {MAX_HEADER_BLOCK} bytes")
        return parse_header_block(raw)


def _stream_id(body: bytes) -> int:
    stream_id = int.from_bytes(body[:4], "big") & 0x7FFFFFFF
    if stream_id == 0:
        raise SpdyError("stream id 0")
    return stream_id


def parse_header_block(raw: bytes) -> dict[str, str]:
    """name -> value (names lowercase; several values of a name are joined by NUL)."""
    if len(raw) < 4:
        raise SpdyError("a header block without its pair count")
    count, offset = int.from_bytes(raw[:4], "big"), 4
    if count > MAX_PAIRS:
        raise SpdyError(f"{count} header pairs; at most {MAX_PAIRS}")
    out: dict[str, str] = {}
    for _ in range(count):
        pair = []
        for _what in ("name", "value"):
            if offset + 4 > len(raw):
                raise SpdyError("a header block ends inside a pair")
            n = int.from_bytes(raw[offset : offset + 4], "big")
            offset += 4
            if offset + n > len(raw):
                raise SpdyError("a header block ends inside a pair")
            pair.append(raw[offset : offset + n].decode("utf-8", "replace"))
            offset += n
        name, value = pair
        if not name or name != name.lower() or name in out:
            raise SpdyError(f"header name {name!r}: empty, not lowercase, or repeated")
        out[name] = value
    if offset != len(raw):
        raise SpdyError("bytes after the last header pair")
    return out


def header_block(headers: dict[str, str]) -> bytes:
    out = [struct.pack(">I", len(headers))]
    for name, value in headers.items():
        for text in (name.lower().encode(), value.encode()):
            out.append(struct.pack(">I", len(text)) + text)
    return b"".join(out)


class Encoder:
    """Frames from this side; its header compressor lives as long as the connection."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, zdict=DICTIONARY)

    def _control(self, kind: int, flags: int, body: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(body)) + body

    def _compressed(self, headers: dict[str, str]) -> bytes:
        raw = header_block(headers)
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_stream(self, stream_id: int, headers: dict[str, str], flags: int = 0) -> bytes:
        body = struct.pack(">IIBB", stream_id, 0, 0, 0) + self._compressed(headers)
        return self._control(SYN_STREAM, flags, body)

    def syn_reply(self, stream_id: int, headers: dict[str, str] | None = None) -> bytes:
        return self._control(SYN_REPLY, 0, struct.pack(">I", stream_id) + self._compressed(headers or {}))

    def rst_stream(self, stream_id: int, status: int) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def goaway(self, last_stream_id: int, status: int = 0) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_stream_id, status))

    def ping(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    @staticmethod
    def data(stream_id: int, data: bytes = b"", fin: bool = False) -> bytes:
        if len(data) >= 1 << 24:
            raise ValueError("a DATA frame carries less than 16 MiB")
        return struct.pack(">II", stream_id & 0x7FFFFFFF, ((FLAG_FIN if fin else 0) << 24) | len(data)) + data
