"""Length-prefixed msgpack frames over asyncio streams.

A frame is a 4-byte big-endian length followed by that many bytes of msgpack.  Anything
else on the wire (a length over the limit, bytes that do not decode) is a ProtocolError:
the caller closes that one connection and the member keeps running.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import msgpack

from store.api.errors import ProtocolError

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20
"""Frames above this are refused outright: no request or Raft batch needs more."""


def encode_frame(obj: Any) -> bytes:
    body: bytes = msgpack.packb(obj, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def encode_frames(objs: list[Any]) -> bytes:
    """Several frames in one buffer: one write (and one syscall) for a batch."""
    pack = msgpack.Packer(use_bin_type=True).pack
    out = bytearray()
    for o in objs:
        body = pack(o)
        out += HEADER.pack(len(body))
        out += body
    return bytes(out)


async def read_frame(reader: asyncio.StreamReader, max_frame: int = MAX_FRAME) -> Any:
    """The next decoded frame; raises asyncio.IncompleteReadError at a clean EOF."""
    head = await reader.readexactly(HEADER.size)
    (n,) = HEADER.unpack(head)
    if n > max_frame:
        raise ProtocolError(f"frame of {n} bytes exceeds the {max_frame}-byte limit")
    body = await reader.readexactly(n)
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types for garbage
        raise ProtocolError(f"undecodable frame of {n} bytes: {type(e).__name__}") from e


class FrameReader:
    """Decodes frames from a stream in chunks: many small frames cost one read() call."""

    def __init__(self, reader: asyncio.StreamReader, max_frame: int = MAX_FRAME) -> None:
        self.reader = reader
        self.max_frame = max_frame
        self.buf = bytearray()
        self.pos = 0

    async def frames(self) -> list[Any]:
        """Every complete frame available (waiting for at least one); [] at EOF."""
        return [obj for obj, _ in await self.sized_frames()]

    async def sized_frames(self) -> list[tuple[Any, int]]:
        """Like `frames`, with each frame's encoded size (for request-size limits)."""
        out: list[tuple[Any, int]] = []
        while not out:
            out = self._parse()
            if out:
                break
            chunk = await self.reader.read(1 << 18)
            if not chunk:
                if len(self.buf) > self.pos:
                    raise ProtocolError(f"connection closed inside a frame ({len(self.buf) - self.pos} bytes pending)")
                return []
            if self.pos:
                del self.buf[: self.pos]
                self.pos = 0
            self.buf += chunk
        return out

    def _parse(self) -> list[tuple[Any, int]]:
        out: list[tuple[Any, int]] = []
        buf, pos, end = self.buf, self.pos, len(self.buf)
        while end - pos >= 4:
            (n,) = HEADER.unpack_from(buf, pos)
            if n > self.max_frame:
                raise ProtocolError(f"frame of {n} bytes exceeds the {self.max_frame}-byte limit")
            if end - pos - 4 < n:
                break
            body = bytes(buf[pos + 4 : pos + 4 + n])
            pos += 4 + n
            try:
                out.append((msgpack.unpackb(body, raw=False, strict_map_key=False), n))
            except Exception as e:
                raise ProtocolError(f"undecodable frame of {n} bytes: {type(e).__name__}") from e
        self.pos = pos
        return out
