"""The data dir's `up.lock`: held by a foreground `raftkube up` for as long as it runs, so a
second `up` on the same data dir is refused (its Ctrl-C would stop the first one's cluster)
instead of starting a second set of processes over the same files."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


class DataDirBusy(Exception):
    """Another `raftkube up` holds the data dir; the message says which and what to do."""


@contextlib.contextmanager
def holding(data_dir: Path) -> Iterator[None]:
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data_dir / "up.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another process"
            raise DataDirBusy(
                f"{data_dir} is in use by `raftkube up` (pid {holder}); stop it there with Ctrl-C,"
                f" or run `raftkube down --data-dir {data_dir}`"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing drops the lock
