"""Replaying a WAL directory into (metadata, hard state, snapshot point, entries after it).

Reading is bounded: the last segment tells where the newest snapshot is, and only the
segments that can hold entries after it are read (see `segment`).  Nothing is modified
here; `WAL.open` applies the repairs this reports (`torn`).

Damage rules:
* in the last segment, bad bytes (incomplete frame, CRC mismatch, zero-filled or garbage
  tail) with no valid frame anywhere after them are a torn tail: reported for truncation;
* anything else (a valid frame after the damage, any damage in an earlier segment, a record
  that passes its CRC but makes no sense, a gap in the entries or in the segment sequence)
  raises `WALCorruptError` naming file and offset.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store.raft.types import Entry, HardState
from store.wal.errors import RecoveryError, WALCorruptError
from store.wal.record import (
    BATCH,
    NO_SNAPSHOT,
    Batch,
    SegmentHeader,
    SnapshotMarker,
    decode_batch,
    decode_segment_header,
    find_frame,
    scan,
)
from store.wal.segment import Segment, list_segments


@dataclass(frozen=True, slots=True)
class TornTail:
    """Bytes at the end of the last segment that a crash left unfinished."""

    path: Path
    offset: int
    """Where the valid data ends: the file is truncated here."""
    size: int
    reason: str
    drop_segment: bool = False
    """Not even the segment header survived: the whole (last) segment goes."""


@dataclass(slots=True)
class ReplayResult:
    metadata: dict[str, Any]
    hard_state: HardState
    snapshot: SnapshotMarker
    """The point `entries` follow: the newest snapshot marker, or the one asked for."""
    entries: list[Entry]
    """The log after `snapshot.index`, contiguous, later writes overwriting earlier ones."""
    latest_snapshot: SnapshotMarker = NO_SNAPSHOT
    """The newest snapshot marker in the WAL (== `snapshot` unless an older one was asked for)."""
    last_index: int = 0
    """The log's last index: `snapshot.index + len(entries)`."""
    segments: list[Segment] = field(default_factory=list)
    """Every segment on disk after the repairs in `torn`, oldest first."""
    segments_read: int = 0
    end_offset: int = 0
    """Where the valid data of the last segment ends (where appending resumes)."""
    torn: list[TornTail] = field(default_factory=list)


@dataclass(slots=True)
class _Read:
    records: list[tuple[int, Any]]
    end: int
    torn: TornTail | None


def _read_segment(seg: Segment, last: bool) -> _Read:
    path = str(seg.path)
    buf = seg.path.read_bytes()
    s = scan(buf, path)
    torn = None
    if s.problem is not None:
        if not last:
            raise WALCorruptError(path, s.end, f"{s.problem} in a segment that is not the last one")
        if not s.zero_tail:
            after = find_frame(buf, s.end + 1)
            if after is not None:
                raise WALCorruptError(path, s.end, f"{s.problem}, followed by a valid record at offset {after}")
        torn = TornTail(seg.path, s.end, len(buf), s.problem, drop_segment=not s.records)
    if s.records:
        off, body = s.records[0]
        header = decode_segment_header(body, path, off)
        if (header.seq, header.last_index + 1) != (seg.seq, seg.first_index):
            raise WALCorruptError(
                path,
                off,
                f"segment header says sequence {header.seq} first index {header.last_index + 1}, "
                f"the file name {seg.seq} and {seg.first_index}",
            )
    return _Read(s.records, s.end, torn)


def _newest_marker(header: SegmentHeader, records: list[tuple[int, Any]], path: str) -> SnapshotMarker:
    newest = header.snapshot
    for off, body in records[1:]:
        snap = decode_batch(body, path, off).snapshot
        if snap is not None and snap.index > newest.index:
            newest = snap
    return newest


def replay(wal_dir: Path, after: SnapshotMarker | None = None) -> ReplayResult:
    """Read the WAL in `wal_dir`; `after` asks for the entries after an older snapshot."""
    segments = list_segments(wal_dir)
    if not segments:
        raise FileNotFoundError(f"no WAL segments in {wal_dir}")
    torn: list[TornTail] = []
    last = _read_segment(segments[-1], last=True)
    while last.torn is not None and last.torn.drop_segment:
        if len(segments) == 1:
            raise WALCorruptError(str(segments[0].path), 0, f"the only segment has no valid header: {last.torn.reason}")
        torn.append(last.torn)
        segments = segments[:-1]
        last = _read_segment(segments[-1], last=True)
    if last.torn is not None:
        torn.append(last.torn)

    last_path = str(segments[-1].path)
    last_header = decode_segment_header(last.records[0][1], last_path, 0)
    target = after if after is not None else _newest_marker(last_header, last.records, last_path)

    start = next((i for i in range(len(segments) - 1, -1, -1) if segments[i].first_index <= target.index + 1), None)
    if start is None:
        raise RecoveryError(
            f"WAL {wal_dir} starts at {segments[0].path.name}: the entries after index {target.index} were released"
        )
    for a, b in itertools.pairwise(segments[start:]):
        if b.seq != a.seq + 1:
            raise WALCorruptError(str(b.path), 0, f"segment sequence jumps from {a.seq} to {b.seq}")

    state = _Replayer(target)
    for i in range(start, len(segments)):
        seg = segments[i]
        read = last if i == len(segments) - 1 else _read_segment(seg, last=False)
        state.segment(seg, read.records, first=i == start)
    return ReplayResult(
        metadata=state.metadata,
        hard_state=state.hard_state,
        snapshot=target,
        entries=state.entries,
        latest_snapshot=max(state.latest, target, key=lambda m: m.index),
        last_index=target.index + len(state.entries),
        segments=segments,
        segments_read=len(segments) - start,
        end_offset=last.end,
        torn=torn,
    )


class _Replayer:
    """Applies records in order with `MemoryStorage` semantics, keeping only entries > target."""

    def __init__(self, target: SnapshotMarker) -> None:
        self.target = target
        self.base = target.index
        self.entries: list[Entry] = []
        self.metadata: dict[str, Any] = {}
        self.hard_state = HardState()
        self.latest = NO_SNAPSHOT

    def segment(self, seg: Segment, records: list[tuple[int, Any]], first: bool) -> None:
        path = str(seg.path)
        header = decode_segment_header(records[0][1], path, records[0][0])
        if first:
            self.metadata = header.metadata
            self.hard_state = header.hard_state
            self.latest = header.snapshot
        for off, body in records[1:]:
            if not isinstance(body, list) or not body or body[0] != BATCH:
                raise WALCorruptError(path, off, "a record after the segment header is not a batch")
            self.batch(decode_batch(body, path, off), path, off)

    def batch(self, b: Batch, path: str, off: int) -> None:
        base = self.base
        if b.snapshot is not None:
            snap = b.snapshot
            if snap.index > self.latest.index:
                self.latest = snap
            if b.reset:
                # The leader's snapshot replaced the whole log (MemoryStorage.apply_snapshot).
                if snap.index > base:
                    raise RecoveryError(
                        f"{path} at offset {off}: a snapshot installed at index {snap.index} replaced the log "
                        f"after {base}; replay from a snapshot at or after {snap.index}"
                    )
                self.entries = []
        if b.terms and b.last_index > self.latest.index:
            # Like MemoryStorage.append: a write wholly inside the snapshot at the time is
            # ignored; any other write ends the log at its last entry.
            last = b.last_index
            if last <= base:
                self.entries = []
            else:
                lo = max(b.first_index, base + 1)
                pos = lo - base - 1
                if pos > len(self.entries):
                    raise WALCorruptError(
                        path, off, f"entries jump from index {base + len(self.entries)} to {lo} (missing entries)"
                    )
                del self.entries[pos:]
                self.entries.extend(b.entries_from(lo))
        if b.hard_state is not None:
            self.hard_state = b.hard_state
