"""Typed errors of the durability layer.

All are `DiskError`s (a `StoreError`), so one that escapes to a client still arrives typed.
Each names the file (and byte offset) involved: an operator must be able to find the bytes.
"""

from __future__ import annotations

from store.api.errors import DiskError


class DurabilityError(DiskError):
    """Base of the WAL, snapshot and data-dir errors."""


class WALCorruptError(DurabilityError):
    """Bytes in the WAL that are not a torn tail: never skipped, never repaired silently."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"WAL corrupt: {path} at byte offset {offset}: {reason}", path=path, offset=offset)
        self.path = path
        self.offset = offset
        self.reason = reason


class RecoveryError(DurabilityError):
    """Snapshot, WAL and hard state do not fit together (e.g. entries after the snapshot were released)."""


class DiskWriteError(DurabilityError):
    """A write or fsync failed; `errno` says why (ENOSPC: disk full).

    After a failed write that could be rolled back the WAL stays usable; after a failed
    fsync it refuses further work (the kernel may have dropped the dirty pages: a retried
    fsync could succeed without the data being on disk), and the member must restart.
    """

    def __init__(self, message: str, path: str, errno: int | None) -> None:
        super().__init__(message, path=path, errno=errno)
        self.path = path
        self.errno = errno


class SnapshotCorruptError(DurabilityError):
    """A snapshot file fails its checks (magic, length, CRC, name vs contents)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"snapshot corrupt: {path}: {reason}", path=path)
        self.path = path
        self.reason = reason


class DataDirLockedError(DurabilityError):
    """Another process (or another lock in this one) holds the data dir."""

    def __init__(self, data_dir: str, pid: int | None) -> None:
        holder = f"pid {pid}" if pid else "another holder (pid not yet written)"
        super().__init__(f"data dir {data_dir} is locked by {holder}", data_dir=data_dir, pid=pid)
        self.data_dir = data_dir
        self.pid = pid
