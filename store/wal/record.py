"""WAL records: the frame around each one, and the two kinds of body.

Frame: `u32 length | u32 crc32(body) | body` (little endian), body = msgpack.

* A plain per-record CRC (not etcd's chained one) makes every frame checkable on its own.
  That is what lets recovery tell a torn tail (nothing valid after the bad spot: truncate)
  from corruption in the middle (a valid frame follows: hard error), even when the damage hit
  a length field and the record boundaries after it are lost: `find_frame` looks for any
  valid frame past the bad spot.  A chained CRC would make that search impossible.
* One `save()` is one batch record, so a crash can only lose whole saves: never entries
  without the hard state that came with them, nor half of a snapshot install.

Bodies (msgpack arrays):

    [SEGMENT, version, seq, metadata, hard_state, snapshot, last_index]   first record of every segment
    [BATCH, snapshot | nil, reset, first_index, terms, types, datas, hard_state | nil]

`hard_state` is `[term, vote, commit]`, `snapshot` is `[index, term]`.  Entries are stored
by column (their indexes are contiguous, so only the first is kept; `types` is one byte per
entry): packing is a few C-level passes, no per-entry Python objects.  `reset` marks a
snapshot installed from the leader (the log is replaced, as `MemoryStorage.apply_snapshot`
does) as opposed to a local snapshot marker (entries after it stay).
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgpack

from store.raft.types import Entry, EntryType, HardState
from store.wal.errors import WALCorruptError

FRAME = struct.Struct("<II")
FRAME_SIZE = FRAME.size
MAX_BODY = 0xFFFFFFFF

SEGMENT = 1
BATCH = 2
FORMAT_VERSION = 1

_term = attrgetter("term")
_type = attrgetter("type")
_data = attrgetter("data")
_NORMAL = EntryType.NORMAL


@dataclass(frozen=True, slots=True)
class SnapshotMarker:
    """A snapshot file covers the log up to `index` (whose term is `term`)."""

    index: int = 0
    term: int = 0


NO_SNAPSHOT = SnapshotMarker()


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    """What a reader needs to start replaying at this segment without the earlier ones."""

    seq: int
    metadata: dict[str, Any]
    hard_state: HardState
    snapshot: SnapshotMarker
    last_index: int
    """The log's last index when the segment was started (its file name says this + 1)."""


@dataclass(frozen=True, slots=True)
class Batch:
    snapshot: SnapshotMarker | None
    reset: bool
    first_index: int
    terms: list[int]
    types: bytes
    datas: list[bytes]
    hard_state: HardState | None

    @property
    def last_index(self) -> int:
        return self.first_index + len(self.terms) - 1

    def entries_from(self, lo: int) -> list[Entry]:
        """The batch's entries with index >= lo, built only now (most replays skip many)."""
        i = max(lo - self.first_index, 0)
        terms, datas = self.terms[i:], self.datas[i:]
        types = self.types[i:]
        kinds: Any = repeat(_NORMAL) if types.count(0) == len(types) else map(EntryType, types)
        return list(map(Entry, terms, range(self.first_index + i, self.first_index + len(self.terms)), kinds, datas))


# ---------------------------------------------------------------- encoding
def frame(body: bytes) -> bytes:
    if len(body) > MAX_BODY:
        raise ValueError(f"WAL record of {len(body)} bytes exceeds the {MAX_BODY}-byte limit")
    return FRAME.pack(len(body), zlib.crc32(body)) + body


def _hs(hs: HardState) -> list[int]:
    return [hs.term, hs.vote, hs.commit]


def encode_segment_header(
    seq: int, metadata: Mapping[str, Any], hard_state: HardState, snapshot: SnapshotMarker, last_index: int
) -> bytes:
    body = msgpack.packb(
        [SEGMENT, FORMAT_VERSION, seq, dict(metadata), _hs(hard_state), [snapshot.index, snapshot.term], last_index]
    )
    return frame(body)


def encode_batch(
    snapshot: SnapshotMarker | None, reset: bool, entries: Sequence[Entry], hard_state: HardState | None
) -> bytes:
    """The framed batch record; `entries` must have contiguous indexes (Raft's always do)."""
    snap = None if snapshot is None else [snapshot.index, snapshot.term]
    hs = None if hard_state is None else _hs(hard_state)
    if entries:
        first = entries[0].index
        if entries[-1].index != first + len(entries) - 1:
            raise ValueError(f"entries are not contiguous: {first}..{entries[-1].index} in {len(entries)} entries")
        body = msgpack.packb(
            [
                BATCH,
                snap,
                reset,
                first,
                list(map(_term, entries)),
                bytes(map(_type, entries)),
                list(map(_data, entries)),
                hs,
            ]
        )
    else:
        body = msgpack.packb([BATCH, snap, reset, 0, [], b"", [], hs])
    return frame(body)


# ---------------------------------------------------------------- scanning
@dataclass(slots=True)
class Scan:
    """The valid records from the start of a buffer, and why the scan stopped."""

    records: list[tuple[int, Any]]
    """(offset, decoded msgpack body) of each valid frame."""
    end: int
    """Offset just past the last valid frame."""
    problem: str | None
    """None: the buffer ended cleanly at `end`.  Otherwise what is wrong at `end`."""
    zero_tail: bool = False
    """Everything from `end` on is zero bytes (a zero-filled tail counts as the end)."""


def scan(buf: bytes, path: str) -> Scan:
    view = memoryview(buf)
    n = len(buf)
    records: list[tuple[int, Any]] = []
    off = 0
    unpack = FRAME.unpack_from
    crc32 = zlib.crc32
    while off < n:
        if n - off < FRAME_SIZE:
            problem = f"incomplete frame header ({n - off} of {FRAME_SIZE} bytes)"
            break
        length, crc = unpack(buf, off)
        if length == 0:
            if buf.count(0, off) == n - off:
                return Scan(records, off, "zero-filled tail", zero_tail=True)
            problem = "zero-length record"
            break
        end = off + FRAME_SIZE + length
        if end > n:
            problem = f"incomplete record (length {length}, only {n - off - FRAME_SIZE} bytes left)"
            break
        body = view[off + FRAME_SIZE : end]
        if crc32(body) != crc:
            problem = f"CRC mismatch (stored {crc:08x}, computed {crc32(body):08x})"
            break
        try:
            records.append((off, msgpack.unpackb(body)))
        except Exception as e:  # the CRC matched: these are the bytes we wrote, not a torn write
            raise WALCorruptError(path, off, f"record passes its CRC but does not decode: {e}") from e
        off = end
    else:
        return Scan(records, off, None)
    return Scan(records, off, problem)


def find_frame(buf: bytes, start: int) -> int | None:
    """The offset of the first valid frame at or after `start`, if any.

    Used only after damage, to decide "torn tail" (no valid frame follows) versus
    "corruption in the middle".  A frame's length must fit in the rest of the buffer, so
    only offsets whose length's top byte is small are candidates (a regex finds them).
    """
    n = len(buf)
    view = memoryview(buf)
    top = min((n >> 24), 0xFF)
    candidates = re.compile(b"[\\x00-" + re.escape(bytes([top])) + b"]")
    unpack = FRAME.unpack_from
    for m in candidates.finditer(buf, start + 3):
        p = m.start() - 3
        if p + FRAME_SIZE > n:
            return None
        length, crc = unpack(buf, p)
        if 0 < length <= n - p - FRAME_SIZE and zlib.crc32(view[p + FRAME_SIZE : p + FRAME_SIZE + length]) == crc:
            return p
    return None


# ---------------------------------------------------------------- decoding
def _marker(v: Any) -> SnapshotMarker:
    index, term = v
    return SnapshotMarker(int(index), int(term))


def _hard_state(v: Any) -> HardState:
    term, vote, commit = v
    return HardState(term=int(term), vote=int(vote), commit=int(commit))


def decode_segment_header(body: Any, path: str, offset: int) -> SegmentHeader:
    try:
        kind, version, seq, metadata, hs, snap, last_index = body
        if kind != SEGMENT:
            raise ValueError(f"first record has kind {kind}, not a segment header")
        if version != FORMAT_VERSION:
            raise ValueError(f"unsupported WAL format version {version} (this build reads {FORMAT_VERSION})")
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata is {type(metadata).__name__}, not a map")
        return SegmentHeader(int(seq), metadata, _hard_state(hs), _marker(snap), int(last_index))
    except (TypeError, ValueError) as e:
        raise WALCorruptError(path, offset, f"bad segment header: {e}") from e


def decode_batch(body: Any, path: str, offset: int) -> Batch:
    try:
        kind, snap, reset, first, terms, types, datas, hs = body
        if kind != BATCH:
            raise ValueError(f"record kind {kind} where a batch was expected")
        if not (isinstance(terms, list) and isinstance(types, bytes) and isinstance(datas, list)):
            raise TypeError("entry columns have the wrong types")
        if not len(terms) == len(types) == len(datas):
            raise ValueError(f"entry columns differ in length: {len(terms)}, {len(types)}, {len(datas)}")
        return Batch(
            None if snap is None else _marker(snap),
            bool(reset),
            int(first),
            terms,
            types,
            datas,
            None if hs is None else _hard_state(hs),
        )
    except (TypeError, ValueError) as e:
        raise WALCorruptError(path, offset, f"bad batch record: {e}") from e
