"""Snapshot files: durable whole-file writes, newest-first loading, corrupt ones set aside."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from store.raft.types import ConfState, Snapshot, SnapshotMetadata
from store.wal import SnapshotCorruptError, Snapshotter
from tests.store.wal.util import flip_bit, truncate


def snap(index: int, term: int = 1, data: bytes = b"state") -> Snapshot:
    return Snapshot(SnapshotMetadata(index, term, ConfState(voters=(1, 2, 3), learners=(4,))), data)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    s = Snapshotter(tmp_path / "snap")
    original = snap(42, 3, bytes(range(256)) * 100)
    path = s.save(original)
    assert path.name == "0000000000000003-000000000000002a.snap"
    assert s.load(path) == original
    assert s.load_newest() == original
    assert list((tmp_path / "snap").iterdir()) == [path]  # no temporaries left


def test_empty_snapshot_is_not_saved(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Snapshotter(tmp_path).save(Snapshot())


def test_load_newest_picks_the_highest_index(tmp_path: Path) -> None:
    s = Snapshotter(tmp_path)
    for i, t in ((5, 1), (30, 2), (12, 2)):
        s.save(snap(i, t))
    newest = s.load_newest()
    assert newest is not None and newest.metadata.index == 30
    assert Snapshotter(tmp_path / "empty").load_newest() is None


def test_load_newest_ignores_snapshots_beyond_the_wal(tmp_path: Path) -> None:
    """A snapshot saved but never recorded in the WAL (crash in between) is not used."""
    s = Snapshotter(tmp_path)
    s.save(snap(10))
    s.save(snap(20))
    newest = s.load_newest(max_index=15)
    assert newest is not None and newest.metadata.index == 10
    assert (tmp_path / "0000000000000001-0000000000000014.snap").exists()  # kept, not broken


@pytest.mark.parametrize("damage", ["flip-data", "flip-header", "truncate", "rename"])
def test_corrupt_snapshot_is_renamed_broken(tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str) -> None:
    """A bad newest snapshot becomes .broken with a warning, and the next one is loaded."""
    s = Snapshotter(tmp_path)
    s.save(snap(10, data=b"old"))
    bad = s.save(snap(20, data=b"new" * 100))
    if damage == "flip-data":
        flip_bit(bad, bad.stat().st_size - 7, 2)
    elif damage == "flip-header":
        flip_bit(bad, 9, 0)
    elif damage == "truncate":
        truncate(bad, bad.stat().st_size - 1)
    else:  # contents say index 20, the name another index
        bad = bad.rename(bad.with_name("0000000000000001-0000000000000015.snap"))
    with pytest.raises(SnapshotCorruptError, match=bad.name):
        s.load(bad)
    with caplog.at_level(logging.WARNING, logger="store.wal"):
        loaded = s.load_newest()
    assert loaded == snap(10, data=b"old")
    assert not bad.exists()
    assert bad.with_name(bad.name + ".broken").exists()
    assert "snapshot corrupt" in caplog.text and bad.name in caplog.text


def test_purge_keeps_the_newest(tmp_path: Path) -> None:
    s = Snapshotter(tmp_path)
    for i in range(1, 8):
        s.save(snap(i * 10))
    (tmp_path / "0000000000000001-0000000000000099.snap.tmp").write_bytes(b"half")
    removed = s.purge(keep=3)
    assert len(removed) == 5
    assert [i for i, _, _ in s.files()] == [70, 60, 50]
    with pytest.raises(ValueError):
        s.purge(keep=0)


def test_purge_keeps_the_snapshot_a_durable_marker_needs(tmp_path: Path) -> None:
    """With `needed` (an older durable WAL marker), the file a restart would load for it stays."""
    s = Snapshotter(tmp_path)
    for i in (1, 300, 600, 900, 1200):
        s.save(snap(i))
    s.purge(keep=2, needed=1)
    assert [i for i, _, _ in s.files()] == [1200, 900, 1]
    s.purge(keep=1, needed=1000)
    assert [i for i, _, _ in s.files()] == [1200, 900]
