"""The data dir's `up.lock`: held, with its pid written in it, by the `raftkube up` that
supervises the cluster (in the foreground, or the detached one `up --detach` leaves running)
for as long as it runs.  A second `up` on the same data dir is refused (it would start a
second set of processes over the same files, and two supervisors would fight); `down` asks
the holder to let go (SIGUSR1: exit without stopping anything) and takes the lock over
before it stops the parts, so that nothing brings them back while they are being stopped."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from machinery.process.launch import read_pid

LOCK_FILE = "up.lock"
RELEASE_SIGNAL = signal.SIGUSR1
"""Sent by `down` to the supervising `up`: stop supervising and exit, leave the parts running."""


class DataDirBusy(Exception):
    """Another `raftkube up` holds the data dir; the message says which and what to do."""


def _busy(data_dir: Path, fd: int) -> DataDirBusy:
    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another process"
    return DataDirBusy(
        f"a cluster already runs in {data_dir}: {data_dir} is in use by `raftkube up` (pid {holder}),"
        f" which supervises it; stop it there with Ctrl-C, or run `raftkube down --data-dir {data_dir}`"
    )


@contextlib.contextmanager
def holding(data_dir: Path) -> Iterator[None]:
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(data_dir, fd) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def holder(data_dir: Path) -> int | None:
    """The pid of the `up` that supervises the data dir, if it is alive (read only: a pid
    reused since is possible, so this is for display; `taking_over` is exact)."""
    return read_pid(data_dir / LOCK_FILE)


@contextlib.contextmanager
def taking_over(data_dir: Path, timeout: float = 30.0) -> Iterator[int | None]:
    """Hold the lock, asking its holder to let go first (RELEASE_SIGNAL, then waiting up to
    `timeout`); yields the pid of the `up` that let go, or None if none held it.  DataDirBusy
    when the holder does not let go in time."""
    path = data_dir / LOCK_FILE
    if not path.exists():
        yield None
        return
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    released: int | None = None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            if released is None:
                text = os.pread(fd, 32, 0).decode(errors="replace").strip()
                if text.isdigit():  # else the holder is still writing it: read it again
                    released = int(text)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(released, RELEASE_SIGNAL)
            if time.monotonic() > deadline:
                raise _busy(data_dir, fd)
            time.sleep(0.05)
        yield released
    finally:
        os.close(fd)
