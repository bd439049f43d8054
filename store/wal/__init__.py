"""Durability: the write-ahead log, snapshot files, the data-dir lock, and restart.

Layout of a member's data dir: `LOCK`, `wal/<seq>-<index>.wal`, `snap/<term>-<index>.snap`.
Every file write goes through `machinery.process.disk`, so that tests can track and break it.

Order for a Ready carrying a snapshot from the leader: `Snapshotter.save(snap)`, then
`WAL.save(hs, entries, sync=True, snapshot=SnapshotMarker(index, term))`.  For a local
snapshot: `Snapshotter.save`, `WAL.save_snapshot_marker`, then `WAL.release_before` and
`Snapshotter.purge`.  A snapshot file is only used if the WAL recorded it (or an older one).
"""

from store.wal.errors import (
    DataDirLockedError,
    DiskWriteError,
    DurabilityError,
    RecoveryError,
    SnapshotCorruptError,
    WALCorruptError,
)
from store.wal.lock import DataDirLock
from store.wal.reader import ReplayResult, TornTail, replay
from store.wal.record import NO_SNAPSHOT, SnapshotMarker
from store.wal.restore import Restored, build_storage, restore, snap_dir, wal_dir
from store.wal.segment import Segment
from store.wal.snapshotter import Snapshotter
from store.wal.wal import DEFAULT_SEGMENT_SIZE, WAL

__all__ = [
    "DEFAULT_SEGMENT_SIZE",
    "NO_SNAPSHOT",
    "WAL",
    "DataDirLock",
    "DataDirLockedError",
    "DiskWriteError",
    "DurabilityError",
    "RecoveryError",
    "ReplayResult",
    "Restored",
    "Segment",
    "SnapshotCorruptError",
    "SnapshotMarker",
    "Snapshotter",
    "TornTail",
    "WALCorruptError",
    "build_storage",
    "replay",
    "restore",
    "snap_dir",
    "wal_dir",
]
