"""One process per data dir, and the error names who holds it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from store.wal import DataDirLock, DataDirLockedError
from tests.support.paths import ROOT

HOLDER = """
import sys, time
from store.wal import DataDirLock
lock = DataDirLock(sys.argv[1]).acquire()
print("locked", flush=True)
sys.stdin.read()
"""


def _hold_in_child(data_dir: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data_dir)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "locked"
    return child


def test_lock_held_by_another_process(tmp_path: Path) -> None:
    """A second member on the same data dir fails with the holder's pid; the lock goes when it dies."""
    child = _hold_in_child(tmp_path)
    try:
        with pytest.raises(DataDirLockedError) as exc:
            DataDirLock(tmp_path).acquire()
        assert exc.value.pid == child.pid
        assert exc.value.data_dir == str(tmp_path)
        assert f"{tmp_path} is locked by pid {child.pid}" in str(exc.value)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert child.stdin is not None
        child.stdin.close()
        assert child.stdout is not None
        child.stdout.close()
    with DataDirLock(tmp_path) as lock:  # SIGKILL released it: no stale lock
        assert lock.held
        assert (tmp_path / "LOCK").read_text() == f"{os.getpid()}\n"


def test_second_lock_in_the_same_process(tmp_path: Path) -> None:
    """flock is per open file: a second lock in this process conflicts too."""
    first = DataDirLock(tmp_path).acquire()
    with pytest.raises(DataDirLockedError) as exc:
        DataDirLock(tmp_path).acquire()
    assert exc.value.pid == os.getpid()
    first.release()
    assert not first.held
    DataDirLock(tmp_path).acquire().release()


def test_lock_creates_the_data_dir(tmp_path: Path) -> None:
    with DataDirLock(tmp_path / "a" / "b") as lock:
        assert lock.path.exists()
