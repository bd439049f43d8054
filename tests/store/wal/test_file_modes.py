"""Data files are private whatever the umask: every directory the disk layer, the WAL, the
snapshotter and the lock create is 0700 and every file 0600.  Each test runs with umask 0,
under which os.open(..., 0o644) and mkdir give 0644 and 0777."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from machinery.process import disk
from store.wal import WAL, DataDirLock, Snapshotter
from tests.store.wal.test_snapshotter import snap
from tests.store.wal.util import ents, flip_bit, hs, segments
from tests.support.modes import mode, not_private, umask


@pytest.fixture(autouse=True)
def umask_zero() -> Iterator[None]:
    with umask(0):
        yield


@pytest.fixture(params=[False, True], ids=["production", "test-mode"])
def tracked(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | None]:
    """Both implementations of the disk layer; in test mode the ledger must be private too."""
    if not request.param:
        yield None
        return
    ledger = tmp_path / "data" / "disk.ledger"
    disk.make_dirs(ledger.parent)
    disk.enable_test_mode(ledger=ledger)
    try:
        yield ledger
    finally:
        disk.disable_test_mode()


def test_disk_layer_creates_private_files_and_directories(tmp_path: Path, tracked: Path | None) -> None:
    root = tmp_path / "data"
    disk.make_dirs(root / "a" / "b")
    for fd in (disk.open_new(root / "a" / "new"), disk.open_append(root / "a" / "b" / "log")):
        disk.write(fd, b"x")
        disk.fsync(fd)
        disk.close(fd)
    disk.rename(root / "a" / "new", root / "a" / "renamed")
    fd = disk.open_log(root / "member.log")
    disk.close(fd)
    disk.write_private(root / "member.json", b"{}")
    assert not_private(root) == []


def test_a_file_found_with_wider_modes_is_made_private(tmp_path: Path, tracked: Path | None) -> None:
    """A data file left 0644 (by an older version) becomes 0600 when the store opens it."""
    old = tmp_path / "old.wal"
    old.write_bytes(b"")
    old.chmod(0o644)
    disk.close(disk.open_append(old))
    assert mode(old) == 0o600


def test_make_dirs_leaves_existing_directories_alone(tmp_path: Path) -> None:
    """Only what it creates is made 0700: the user's own directories keep their modes."""
    mine = tmp_path / "mine"
    mine.mkdir()
    mine.chmod(0o755)
    disk.make_dirs(mine / "x" / "y")
    assert (mode(mine), mode(mine / "x"), mode(mine / "x" / "y")) == (0o755, 0o700, 0o700)


def test_wal_segments_and_directory_are_private(tmp_path: Path, tracked: Path | None) -> None:
    d = tmp_path / "data" / "member" / "wal"
    with WAL.create(d, {"member_id": 1}, segment_size=600) as w:
        for lo in range(1, 60, 5):
            w.save(hs(commit=lo), ents(lo, lo + 4))
        w.save_snapshot_marker(40, 1)
        w.release_before(30)
    assert len(segments(d)) > 1
    w, _ = WAL.open(d)
    w.save(hs(commit=70), ents(61, 70))
    w.close()
    assert not_private(tmp_path / "data" / "member") == []


def test_snapshot_files_and_directory_are_private(tmp_path: Path, tracked: Path | None) -> None:
    member = tmp_path / "data" / "member"
    s = Snapshotter(member / "snap")
    for i in range(1, 6):
        s.save(snap(i * 10))
    s.purge(keep=3)
    flip_bit(member / "snap" / "0000000000000001-0000000000000032.snap", 30, 1)
    assert s.load_newest() is not None  # the damaged one is renamed .broken
    assert not_private(member) == []


def test_lock_file_and_data_dir_are_private(tmp_path: Path, tracked: Path | None) -> None:
    member = tmp_path / "data" / "member"
    with DataDirLock(member):
        assert not_private(member) == []
