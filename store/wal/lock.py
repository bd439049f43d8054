"""One process per data dir: an exclusive `flock` on `<data_dir>/LOCK`.

flock locks belong to the open file, not the process, so a second `DataDirLock` in the same
process conflicts too, and the kernel drops the lock when the holder dies (even by SIGKILL):
no stale lock to clean up.  The holder writes its pid into the file so that the error can
name it.  The file is never deleted: unlinking it would let two processes lock two inodes.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from machinery.process import disk
from store.wal.errors import DataDirLockedError

LOCK_NAME = "LOCK"


class DataDirLock:
    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LOCK_NAME
        self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> DataDirLock:
        """Take the lock or raise DataDirLockedError naming the holder's pid."""
        if self.held:
            return self
        disk.make_dirs(self.data_dir)
        fd = disk.open_append(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            disk.close(fd)
            raise DataDirLockedError(str(self.data_dir), self._holder()) from None
        except BaseException:
            disk.close(fd)
            raise
        try:
            disk.truncate(fd, 0)
            disk.write(fd, f"{os.getpid()}\n".encode())
        except BaseException:
            disk.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            disk.close(fd)  # closing drops the flock

    def _holder(self) -> int | None:
        try:
            text = self.path.read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def __enter__(self) -> DataDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
