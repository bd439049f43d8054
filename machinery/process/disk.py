"""The one layer every durable file write goes through (the store's WAL and snapshots, and
every process's pid, configuration and certificate files), so that tests can see and break it.

Production: each function is a thin wrapper over `os` (one extra Python call, nothing else).

Test mode (the environment variable `RAFTKUBE_DISK_TRACK=<ledger>` and/or
`RAFTKUBE_DISK_FAULT_FILE=<flag>` at import, or `enable_test_mode()`) swaps the module's
functions for tracking ones that:

* append one JSON line `{"path": ..., "synced": N}` to the ledger whenever a file's first N
  bytes become known durable (fsync / fdatasync), and `{"path": ..., "removed": true}` when a
  file goes away; after a SIGKILL, `simulate_crash(ledger)` truncates every tracked file to its
  fsynced length, which is what a power loss may leave (the LazyFS idea, contents only:
  directory entries are taken as durable at once);
* raise injected faults: while the flag file exists (or `set_fault()` says so), its content
  names the fault: `enospc` (default; a write fails with ENOSPC and writes nothing),
  `enospc-partial` (writes half, then fails), `eio-fsync` (fsync fails with EIO).

Callers must use `disk.write(...)`, never `from machinery.process.disk import write`: enabling test mode
rebinds the module attributes.  Reads do not go through this layer.

Data files are private whatever the process umask: every file this layer creates is 0600
(FILE_MODE) and every directory 0700 (DIR_MODE; `make_dirs`, since mkdir honours the umask).
Files that the crash simulation must leave alone (logs, the apply log, pid and configuration
files) are written with the untracked helpers `open_log` and `write_private`, with the same
modes.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

TRACK_ENV = "RAFTKUBE_DISK_TRACK"
FAULT_FILE_ENV = "RAFTKUBE_DISK_FAULT_FILE"

FAULTS = ("enospc", "enospc-partial", "eio-fsync")

_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)

StrPath = str | os.PathLike[str]

FILE_MODE = 0o600
"""Every data file: read and written by its owner only."""
DIR_MODE = 0o700
"""Every data directory."""


# ---------------------------------------------------------------- private files and directories
def _open_private(path: StrPath, flags: int) -> int:
    """os.open creating the file as FILE_MODE (the umask cannot widen it: a file found with
    other bits, created under an older version or a narrower umask, is set to FILE_MODE)."""
    fd = os.open(path, flags, FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o777 != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_dirs(path: StrPath) -> None:
    """Create directory `path` and any missing parent as DIR_MODE (mkdir honours the umask, so
    each one created is chmod-ed); directories that exist already are left as they are."""
    missing = []
    p = os.path.abspath(path)
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
            continue  # created by someone else meanwhile: theirs
        os.chmod(d, DIR_MODE)


def open_log(path: StrPath) -> int:
    """Open a log for appending (created FILE_MODE); untracked: a crash simulation leaves it whole."""
    return _open_private(path, _APPEND_FLAGS)


def write_private(path: StrPath, data: bytes) -> None:
    """Replace a small file (configuration, pid, a backup to restore) at once: written to a
    temporary FILE_MODE file, then renamed over `path`.  Untracked and not fsynced."""
    tmp = os.fspath(path) + ".tmp"
    fd = _open_private(tmp, _NEW_FLAGS)
    try:
        _write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


# ---------------------------------------------------------------- production implementation
def _open_append(path: StrPath) -> int:
    """Open (creating if needed) for appending; every write lands at the end."""
    return _open_private(path, _APPEND_FLAGS)


def _open_new(path: StrPath) -> int:
    """Create or empty a file and open it for writing."""
    return _open_private(path, _NEW_FLAGS)


def _write(fd: int, data: bytes) -> None:
    """Write all of `data`: one write() syscall unless the kernel takes less."""
    n = os.write(fd, data)
    if n < len(data):
        view = memoryview(data)[n:]
        while view:
            view = view[os.write(fd, view) :]


_fdatasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


def _fsync_dir(path: StrPath) -> None:
    """Make creations, renames and removals inside directory `path` durable."""
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


open_append: Callable[[StrPath], int] = _open_append
open_new: Callable[[StrPath], int] = _open_new
write: Callable[[int, bytes], None] = _write
fsync: Callable[[int], None] = os.fsync
fdatasync: Callable[[int], None] = _fdatasync
truncate: Callable[[int, int], None] = os.ftruncate
rename: Callable[[StrPath, StrPath], None] = os.replace
fsync_dir: Callable[[StrPath], None] = _fsync_dir
remove: Callable[[StrPath], None] = os.unlink
close: Callable[[int], None] = os.close

_PRODUCTION = {
    "open_append": open_append,
    "open_new": open_new,
    "write": write,
    "fsync": fsync,
    "fdatasync": fdatasync,
    "truncate": truncate,
    "rename": rename,
    "fsync_dir": fsync_dir,
    "remove": remove,
    "close": close,
}


# ---------------------------------------------------------------- test mode
class _Tracker:
    """Remembers each file's fsynced length and injects faults; test mode only."""

    def __init__(self, ledger: Path | None, fault_file: Path | None) -> None:
        self.ledger = ledger
        self.fault_file = fault_file
        self.fault: str | None = None
        self.paths: dict[int, str] = {}
        self.synced: dict[str, int] = _read_ledger(ledger) if ledger is not None and ledger.exists() else {}
        self.lock = threading.Lock()
        self._ledger_fd = _open_private(ledger, _APPEND_FLAGS) if ledger is not None else -1

    def shutdown(self) -> None:
        if self._ledger_fd >= 0:
            os.close(self._ledger_fd)
            self._ledger_fd = -1

    # -- bookkeeping
    def _record(self, line: dict[str, object]) -> None:
        if self._ledger_fd >= 0:
            os.write(self._ledger_fd, (json.dumps(line) + "\n").encode())

    def _set_synced(self, path: str, length: int) -> None:
        with self.lock:
            self.synced[path] = length
            self._record({"path": path, "synced": length})

    def _path_of(self, fd: int) -> str:
        path = self.paths.get(fd)
        if path is None:  # opened before test mode was enabled
            path = os.readlink(f"/proc/self/fd/{fd}")
        return path

    def _active_fault(self) -> str | None:
        if self.fault is not None:
            return self.fault
        if self.fault_file is not None:
            try:
                text = self.fault_file.read_text().strip()
            except FileNotFoundError:
                return None
            return text or "enospc"
        return None

    # -- the disk functions
    def open_append(self, path: StrPath) -> int:
        return self._opened(path, _open_append)

    def open_new(self, path: StrPath) -> int:
        fd = self._opened(path, _open_new)
        self._set_synced(self.paths[fd], 0)
        return fd

    def _opened(self, path: StrPath, opener: Callable[[StrPath], int]) -> int:
        key = os.path.abspath(path)
        existed = os.path.exists(key)
        fd = opener(path)
        self.paths[fd] = key
        if key not in self.synced:
            # A file found on disk at first sight is taken as durable (it survived a crash
            # simulation, or predates test mode); a new one has nothing durable yet.
            self._set_synced(key, os.fstat(fd).st_size if existed else 0)
        return fd

    def write(self, fd: int, data: bytes) -> None:
        fault = self._active_fault()
        if fault == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._path_of(fd))
        if fault == "enospc-partial":
            _write(fd, bytes(memoryview(data)[: len(data) // 2]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._path_of(fd))
        _write(fd, data)

    def _synced(self, fd: int, sync: Callable[[int], None]) -> None:
        if self._active_fault() == "eio-fsync":
            raise OSError(errno.EIO, os.strerror(errno.EIO), self._path_of(fd))
        sync(fd)
        self._set_synced(self._path_of(fd), os.fstat(fd).st_size)

    def fsync(self, fd: int) -> None:
        self._synced(fd, os.fsync)

    def fdatasync(self, fd: int) -> None:
        self._synced(fd, _fdatasync)

    def truncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)
        path = self._path_of(fd)
        if self.synced.get(path, 0) > length:
            self._set_synced(path, length)

    def rename(self, src: StrPath, dst: StrPath) -> None:
        os.replace(src, dst)
        s, d = os.path.abspath(src), os.path.abspath(dst)
        with self.lock:
            length = self.synced.pop(s, None)
            self._record({"path": s, "removed": True})
            for fd, p in self.paths.items():
                if p == s:
                    self.paths[fd] = d
        self._set_synced(d, length if length is not None else os.path.getsize(d))

    def fsync_dir(self, path: StrPath) -> None:
        if self._active_fault() == "eio-fsync":
            raise OSError(errno.EIO, os.strerror(errno.EIO), os.fspath(path))
        _fsync_dir(path)

    def remove(self, path: StrPath) -> None:
        os.unlink(path)
        key = os.path.abspath(path)
        with self.lock:
            self.synced.pop(key, None)
            self._record({"path": key, "removed": True})

    def close(self, fd: int) -> None:
        self.paths.pop(fd, None)
        os.close(fd)


_tracker: _Tracker | None = None


def enable_test_mode(ledger: StrPath | None = None, fault_file: StrPath | None = None) -> None:
    """Route every disk call through the tracker; open files after this call."""
    global _tracker  # noqa: PLW0603 - the module *is* the switch: callers look functions up on it
    disable_test_mode()
    _tracker = _Tracker(Path(ledger) if ledger else None, Path(fault_file) if fault_file else None)
    globals().update({name: getattr(_tracker, name) for name in _PRODUCTION})


def disable_test_mode() -> None:
    """Back to the plain production functions."""
    global _tracker  # noqa: PLW0603
    if _tracker is not None:
        _tracker.shutdown()
        _tracker = None
    globals().update(_PRODUCTION)


def in_test_mode() -> bool:
    return _tracker is not None


def set_fault(fault: str | None) -> None:
    """Inject `fault` (one of FAULTS) into every following call, or stop injecting (None)."""
    if _tracker is None:
        raise RuntimeError("disk faults need test mode: call enable_test_mode() first")
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"unknown disk fault {fault!r}; known: {', '.join(FAULTS)}")
    _tracker.fault = fault


def synced_lengths() -> dict[str, int]:
    """Each tracked file's fsynced length, by absolute path (test mode only)."""
    if _tracker is None:
        raise RuntimeError("synced lengths are tracked in test mode only")
    with _tracker.lock:
        return dict(_tracker.synced)


def _read_ledger(ledger: Path) -> dict[str, int]:
    synced: dict[str, int] = {}
    with ledger.open() as f:
        for line in f:
            if not line.endswith("\n"):
                break  # the writer died mid-line
            rec = json.loads(line)
            if rec.get("removed"):
                synced.pop(rec["path"], None)
            else:
                synced[rec["path"]] = int(rec["synced"])
    return synced


def simulate_crash(ledger: StrPath) -> dict[str, tuple[int, int]]:
    """After the writer was killed: cut every tracked file back to its fsynced length.

    Returns {path: (size before, size after)} for the files that were cut.
    """
    cut: dict[str, tuple[int, int]] = {}
    for path, length in _read_ledger(Path(ledger)).items():
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            continue
        if size > length:
            os.truncate(path, length)
            cut[path] = (size, length)
    return cut


PER_MEMBER = "member"
"""`RAFTKUBE_DISK_TRACK=member`: each member process keeps its ledger in its own data dir
(`disk.ledger`, see `ledger_for`); the member enables test mode itself once it knows the dir."""
LEDGER_FILE = "disk.ledger"


def ledger_for(data_dir: StrPath) -> Path:
    return Path(data_dir) / LEDGER_FILE


def enable_for_member(data_dir: StrPath) -> None:
    """Test mode as the environment asks, with a per-member ledger if it says `member`."""
    if os.environ.get(TRACK_ENV) == PER_MEMBER:
        enable_test_mode(ledger_for(data_dir), os.environ.get(FAULT_FILE_ENV) or None)


if (os.environ.get(TRACK_ENV) or os.environ.get(FAULT_FILE_ENV)) and os.environ.get(TRACK_ENV) != PER_MEMBER:
    enable_test_mode(os.environ.get(TRACK_ENV) or None, os.environ.get(FAULT_FILE_ENV) or None)
