"""The write-ahead log: Raft's hard state, entries and snapshot markers, durable before use.

The member persists each Ready with one `save()`: one record, one write(), one fdatasync
(group commit).  Segments roll over at `segment_size` (a soft limit: a batch is never split).
New segments are not preallocated: measured on this project's ext4 VM, fdatasync after an
appending write costs ~190 µs against ~140-160 µs into fallocated/zeroed space, too little
to pay for zero-scanning on open, positioned writes and a 64 MiB write per segment.
Readers still accept a zero-filled tail, which some file systems leave after a crash.

A segment is written as `<name>.tmp` (header record, fdatasync), renamed, and the directory
fsynced, so a segment on disk always starts with a whole header.  Before a new segment
starts, the previous one is fdatasynced: only the last segment can ever have a torn tail.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from machinery.process import disk
from store.raft.types import Entry, HardState
from store.wal.errors import DiskWriteError
from store.wal.reader import ReplayResult, replay
from store.wal.record import NO_SNAPSHOT, SnapshotMarker, encode_batch, encode_segment_header
from store.wal.segment import Segment, list_segments, list_temporaries, segment_name

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_SIZE = 64 << 20


class WAL:
    """One member's log.  One writer (not thread-safe); use `create` or `open`."""

    def __init__(
        self,
        wal_dir: Path,
        segments: list[Segment],
        fd: int,
        size: int,
        metadata: dict[str, Any],
        hard_state: HardState,
        snapshot: SnapshotMarker,
        last_index: int,
        segment_size: int,
    ) -> None:
        self.dir = wal_dir
        self._segments = segments
        self._fd = fd
        self._size = size
        self.metadata = metadata
        self._hs = hard_state
        self._snapshot = snapshot
        self._durable_snapshot = snapshot
        self._last = last_index
        self.segment_size = segment_size
        self._dirty = False
        self._failed: str | None = None

    # ------------------------------------------------------------------ lifecycle
    @staticmethod
    def exists(wal_dir: str | os.PathLike[str]) -> bool:
        path = Path(wal_dir)
        return path.is_dir() and bool(list_segments(path))

    @classmethod
    def create(
        cls, wal_dir: str | os.PathLike[str], metadata: Mapping[str, Any], *, segment_size: int = DEFAULT_SEGMENT_SIZE
    ) -> WAL:
        """A new, empty WAL whose every segment will carry `metadata` (msgpack-able)."""
        path = Path(wal_dir)
        disk.make_dirs(path)
        if list_segments(path):
            raise FileExistsError(f"a WAL already exists in {path}")
        for tmp in list_temporaries(path):
            disk.remove(tmp)
        wal = cls(path, [], -1, 0, dict(metadata), HardState(), NO_SNAPSHOT, 0, segment_size)
        seg, fd, size = wal._write_segment(0)
        disk.fsync_dir(path.parent)
        wal._fd = fd
        wal._segments.append(seg)
        wal._size = size
        return wal

    @classmethod
    def open(
        cls,
        wal_dir: str | os.PathLike[str],
        *,
        after: SnapshotMarker | None = None,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
    ) -> tuple[WAL, ReplayResult]:
        """Replay, repair a torn tail (with a warning), and get ready to append.

        `after` replays from an older snapshot than the newest marker (when the newest
        snapshot file turned out unreadable); it fails if those entries were released.
        """
        path = Path(wal_dir)
        for tmp in list_temporaries(path):
            log.warning("removing %s, a segment whose creation a crash interrupted", tmp)
            disk.remove(tmp)
        result = replay(path, after)
        last = result.segments[-1]
        for t in result.torn:
            if t.drop_segment:
                log.warning("WAL %s: dropping the last segment, its header is torn (%s)", t.path, t.reason)
                disk.remove(t.path)
            else:
                log.warning(
                    "WAL %s: truncating a torn tail at byte offset %d (%d bytes: %s)",
                    t.path,
                    t.offset,
                    t.size - t.offset,
                    t.reason,
                )
        fd = disk.open_append(last.path)
        try:
            if any(t.path == last.path for t in result.torn):
                disk.truncate(fd, result.end_offset)
                disk.fdatasync(fd)
            if any(t.drop_segment for t in result.torn):
                disk.fsync_dir(path)
        except BaseException:
            disk.close(fd)
            raise
        wal = cls(
            path,
            list(result.segments),
            fd,
            result.end_offset,
            result.metadata,
            result.hard_state,
            result.latest_snapshot,
            result.last_index,
            segment_size,
        )
        return wal, result

    def close(self, sync: bool = True) -> None:
        """Close the log; by default first make everything written durable."""
        if self._fd < 0:
            return
        try:
            if sync and self._dirty and self._failed is None:
                self.sync()
        finally:
            disk.close(self._fd)
            self._fd = -1

    def __enter__(self) -> WAL:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ state
    @property
    def hard_state(self) -> HardState:
        return self._hs

    @property
    def snapshot(self) -> SnapshotMarker:
        """The newest snapshot marker written."""
        return self._snapshot

    @property
    def durable_snapshot(self) -> SnapshotMarker:
        """The newest snapshot marker known to be on disk: the one replayed at open, then the
        newest one written before the latest fdatasync.  Behind `snapshot` only while a marker
        was written with sync=False; a crash may then leave the log pointing at this one."""
        return self._durable_snapshot

    @property
    def last_index(self) -> int:
        return self._last

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    # ------------------------------------------------------------------ writing
    def save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        sync: bool = True,
        snapshot: SnapshotMarker | None = None,
    ) -> None:
        """Persist one Ready: `snapshot` (installed from the leader; its file already saved),
        then `entries`, then `hard_state`, as one record in one write; fdatasync when `sync`.

        Entries may overwrite a conflicting suffix, exactly as `MemoryStorage.append`.
        """
        self._check_usable()
        if not entries and hard_state is None and snapshot is None:
            if sync and self._dirty:
                self.sync()
            return
        last = self._last
        floor = self._snapshot.index
        if snapshot is not None:
            if snapshot.index <= floor:
                raise ValueError(f"snapshot at {snapshot.index} is not newer than the one at {floor}")
            last = floor = snapshot.index
        if entries:
            if entries[0].index > last + 1:
                raise ValueError(f"entries start at {entries[0].index}, after a gap (last index {last})")
            if entries[-1].index > floor:
                last = entries[-1].index
        self._append(encode_batch(snapshot, snapshot is not None, entries, hard_state), sync, snapshot)
        self._last = last
        if hard_state is not None:
            self._hs = hard_state

    def save_snapshot_marker(self, index: int, term: int, sync: bool = True) -> None:
        """Record that a snapshot file (already saved) covers the log up to `index`.

        Entries after `index` stay; `release_before(index)` may then drop older segments.
        """
        self._check_usable()
        if index <= self._snapshot.index:
            raise ValueError(f"snapshot at {index} is not newer than the one at {self._snapshot.index}")
        if index > self._last:
            raise ValueError(f"snapshot at {index} is beyond the last index {self._last}")
        marker = SnapshotMarker(index, term)
        self._append(encode_batch(marker, False, [], None), sync, marker)

    def sync(self) -> None:
        """fdatasync what was written with sync=False."""
        self._check_usable()
        try:
            disk.fdatasync(self._fd)
        except OSError as e:
            self._fail(f"fdatasync of {self._segments[-1].path} failed: {e}")
            raise DiskWriteError(self._failed or "", str(self._segments[-1].path), e.errno) from e
        self._dirty = False
        self._durable_snapshot = self._snapshot

    def release_before(self, index: int) -> list[Path]:
        """Delete the segments holding only entries before `index` (never the current one).

        `index` may not pass the newest snapshot marker + 1: replay needs everything after it.
        """
        if index > self._snapshot.index + 1:
            raise ValueError(f"cannot release up to {index}: the newest snapshot is at {self._snapshot.index}")
        keep = max((i for i, s in enumerate(self._segments) if s.first_index <= index), default=0)
        removed = []
        for seg in self._segments[:keep]:
            disk.remove(seg.path)
            removed.append(seg.path)
        del self._segments[:keep]
        return removed

    # ------------------------------------------------------------------ internals
    def _check_usable(self) -> None:
        if self._failed is not None:
            why = f"WAL {self.dir} is unusable after an earlier failure: {self._failed}"
            raise DiskWriteError(why, str(self.dir), None)
        if self._fd < 0:
            raise ValueError(f"WAL {self.dir} is closed")

    def _fail(self, why: str) -> None:
        self._failed = why
        log.error("WAL %s: %s; no further writes are accepted", self.dir, why)

    def _append(self, record: bytes, sync: bool, marker: SnapshotMarker | None = None) -> None:
        """Write one record (carrying snapshot `marker`, if any); fdatasync when `sync`."""
        if self._size >= self.segment_size:
            self._cut()
        path = self._segments[-1].path
        try:
            disk.write(self._fd, record)
        except OSError as e:
            self._rollback(path, e)
        self._size += len(record)
        self._dirty = True
        if marker is not None:
            self._snapshot = marker
        if sync:
            self.sync()

    def _rollback(self, path: Path, e: OSError) -> None:
        """Remove the part of a failed write that reached the file: the log stays whole."""
        try:
            disk.truncate(self._fd, self._size)
        except OSError as e2:
            self._fail(f"write to {path} failed ({e}) and truncating back to {self._size} failed ({e2})")
            raise DiskWriteError(self._failed or "", str(path), e.errno) from e
        raise DiskWriteError(f"write to {path} failed: {e}", str(path), e.errno) from e

    def _cut(self) -> None:
        """Start the next segment, named after the log's last index + 1.

        Everything that can fail for want of a resource (a file descriptor, space) happens
        before the new segment is renamed into place, and such a failure leaves the WAL as
        it was: the caller may retry the same write once the resource is back."""
        if self._dirty:
            self.sync()
        seg, fd, size = self._write_segment(self._segments[-1].seq + 1)
        disk.close(self._fd)
        self._fd = fd
        self._segments.append(seg)
        self._size = size

    def _write_segment(self, seq: int) -> tuple[Segment, int, int]:
        """Write a segment's header via a temporary file, kept open for appending, then
        install it; returns the segment, its descriptor and its size."""
        seg = Segment(seq, self._last + 1, self.dir / segment_name(seq, self._last + 1))
        tmp = seg.path.with_name(seg.path.name + ".tmp")
        header = encode_segment_header(seq, self.metadata, self._hs, self._snapshot, self._last)
        try:
            with contextlib.suppress(FileNotFoundError):
                disk.remove(tmp)  # left by an earlier failed attempt: appends must start empty
            fd = disk.open_append(tmp)
        except OSError as e:
            raise DiskWriteError(f"creating segment {tmp} failed: {e}", str(tmp), e.errno) from e
        try:
            disk.write(fd, header)
            disk.fdatasync(fd)
        except OSError as e:
            disk.close(fd)
            with contextlib.suppress(OSError):
                disk.remove(tmp)
            raise DiskWriteError(f"creating segment {tmp} failed: {e}", str(tmp), e.errno) from e
        try:
            disk.rename(tmp, seg.path)
            disk.fsync_dir(self.dir)
        except OSError as e:
            disk.close(fd)
            self._fail(f"installing segment {seg.path} failed: {e}")
            raise DiskWriteError(self._failed or "", str(seg.path), e.errno) from e
        return seg, fd, len(header)
