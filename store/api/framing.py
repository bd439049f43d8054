"""Length-prefixed msgpack frames over asyncio streams.

A frame is a 4-byte big-endian length followed by that many bytes of msgpack.  Anything
else on the wire (a length over the limit, bytes that do not decode) is a ProtocolError:
the caller closes that one connection and the member keeps running.

The length is checked before the body is buffered.  A reader that must answer an oversized
request rather than drop the connection (the client port) skips the body without keeping
it and yields an `Oversized` in its place, carrying the request id read from the body's
first bytes: memory stays bounded by the limit whatever length a peer announces.

A reader given a `frame_timeout` also bounds how long a frame may take to arrive once its
first byte has: a peer that sends half a frame and stops is a ProtocolError after that many
seconds.  Between frames it may stay silent as long as it likes (watches and keepalives idle).
"""

from __future__ import annotations

import asyncio
import struct
import threading
from dataclasses import dataclass
from typing import Any

import msgpack

from store.api.errors import ProtocolError

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20
"""Frames above this are refused outright: no request or Raft batch needs more."""


_packers = threading.local()


def _packer() -> msgpack.Packer:
    """This thread's Packer, reused.  `msgpack.packb` makes a new one per call, whose 256 KiB
    buffer is an mmap and a munmap (and their page faults) every time in a process that fixes
    glibc's mmap threshold, as the apiserver does (apiserver.malloc): 8.6 us a request's frame
    against 0.85 us reused, and 7.7 % of the apiserver's samples under creates (py-spy)."""
    packer: msgpack.Packer | None = getattr(_packers, "packer", None)
    if packer is None:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    return packer


def encode_frame(obj: Any) -> bytes:
    body: bytes = _packer().pack(obj)
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


@dataclass(frozen=True, slots=True)
class Oversized:
    """A frame over the limit, skipped unread: `request_id` is None if its first bytes do
    not start a request array with an integer id."""

    request_id: int | None
    size: int


_PEEK = 16
"""Bytes of an oversized body read for its request id (array header + uint64 fit in 14)."""


def _peek_request_id(head: bytes) -> int | None:
    u = msgpack.Unpacker(raw=False)
    u.feed(head)
    try:
        if u.read_array_header() < 1:
            return None
        rid = u.unpack()
    except Exception:  # not an array, or cut short: no id to answer
        return None
    return rid if type(rid) is int else None


class FrameReader:
    """Decodes frames from a stream in chunks: many small frames cost one read() call."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        max_frame: int = MAX_FRAME,
        skip_oversized: bool = False,
        frame_timeout: float | None = None,
    ) -> None:
        self.reader = reader
        self.max_frame = max_frame
        self.skip_oversized = skip_oversized
        """Yield an `Oversized` for a frame over the limit (instead of a ProtocolError)."""
        self.buf = bytearray()
        self.pos = 0
        self._skip = 0
        """Bytes of an oversized frame's body still to be read and dropped."""
        self.frame_timeout = frame_timeout
        """Seconds a frame may take from its first byte to its last (None: forever)."""
        self._started: float | None = None
        """Loop time the frame in progress began to arrive (None between frames)."""

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
            chunk = await self._read()
            if not chunk:
                if len(self.buf) > self.pos or self._skip:
                    raise ProtocolError(f"connection closed inside a frame ({len(self.buf) - self.pos} bytes pending)")
                return []
            if self._skip:
                if len(chunk) <= self._skip:
                    self._skip -= len(chunk)
                    continue
                chunk = chunk[self._skip :]
                self._skip = 0
            if self.pos:
                del self.buf[: self.pos]
                self.pos = 0
            self.buf += chunk
        if self.frame_timeout is not None:
            # Frames were completed: what is left over is the start of the next one, which
            # began in the chunk just read (a frame before it ended there).
            partial = len(self.buf) > self.pos or self._skip > 0
            self._started = asyncio.get_running_loop().time() if partial else None
        return out

    async def _read(self) -> bytes:
        if self.frame_timeout is None:
            return await self.reader.read(1 << 18)
        loop = asyncio.get_running_loop()
        if self._started is None and (len(self.buf) > self.pos or self._skip > 0):
            self._started = loop.time()
        if self._started is None:
            return await self.reader.read(1 << 18)  # between frames: silence is fine
        left = self._started + self.frame_timeout - loop.time()
        try:
            if left <= 0:
                raise TimeoutError
            return await asyncio.wait_for(self.reader.read(1 << 18), left)
        except TimeoutError:
            raise ProtocolError(
                f"a frame is not complete {self.frame_timeout:.1f}s after its first byte "
                f"({len(self.buf) - self.pos} bytes of it buffered; frame_timeout is {self.frame_timeout:.1f}s)"
            ) from None

    def _parse(self) -> list[tuple[Any, int]]:
        out: list[tuple[Any, int]] = []
        buf, pos, end = self.buf, self.pos, len(self.buf)
        while end - pos >= 4:
            (n,) = HEADER.unpack_from(buf, pos)
            if n > self.max_frame:
                if not self.skip_oversized:
                    raise ProtocolError(f"frame of {n} bytes exceeds the {self.max_frame}-byte limit")
                have = end - pos - 4
                if have < _PEEK:
                    break  # wait for the first bytes of the body, to learn the request id
                rid = _peek_request_id(bytes(buf[pos + 4 : pos + 4 + _PEEK]))
                out.append((Oversized(rid, n), n))
                taken = min(have, n)
                pos += 4 + taken
                self._skip = n - taken
                if self._skip:
                    break  # the buffer is used up; the rest of the body is dropped as it comes
                continue
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
