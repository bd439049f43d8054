"""Restart in one call: a RawNode persisted through the WAL comes back with the same log and state."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from store.raft import Config, MemoryStorage, RawNode
from store.raft.types import ConfState, EntryType, HardState, Snapshot, SnapshotMetadata
from store.wal import (
    WAL,
    DataDirLock,
    RecoveryError,
    SnapshotMarker,
    Snapshotter,
    build_storage,
    replay,
    restore,
    snap_dir,
    wal_dir,
)
from tests.store.wal.util import ents, flip_bit


class Member:
    """A one-voter member persisting every Ready through the WAL, as the server does."""

    def __init__(self, data_dir: Path, storage: MemoryStorage, wal: WAL, applied: int, state: list[bytes]) -> None:
        self.dir = data_dir
        self.storage = storage
        self.wal = wal
        self.snaps = Snapshotter(snap_dir(data_dir))
        self.state = state
        self.applied = applied
        self.node = RawNode(Config(id=1, storage=storage, rng=random.Random(1), applied=applied))

    @classmethod
    def new(cls, data_dir: Path) -> Member:
        m = cls(data_dir, MemoryStorage(), WAL.create(wal_dir(data_dir), {"member_id": 1}, segment_size=2048), 0, [])
        m.node.bootstrap([1])
        m.run()
        m.node.campaign()
        m.run()
        return m

    @classmethod
    def restart(cls, data_dir: Path) -> Member:
        r = restore(data_dir, segment_size=2048)
        state = r.snapshot.data.split(b"|") if r.snapshot.data else []
        m = cls(data_dir, r.storage, r.wal, r.snapshot.metadata.index, state)
        m.node.campaign()
        m.run()
        return m

    def run(self) -> None:
        while self.node.has_ready():
            rd = self.node.ready()
            marker = None
            if rd.snapshot is not None:
                self.snaps.save(rd.snapshot)
                marker = SnapshotMarker(rd.snapshot.metadata.index, rd.snapshot.metadata.term)
            self.wal.save(rd.hard_state, rd.entries, sync=rd.must_sync, snapshot=marker)
            if rd.snapshot is not None:
                self.storage.apply_snapshot(rd.snapshot)
                self.applied = rd.snapshot.metadata.index
            self.storage.append(rd.entries)
            if rd.hard_state is not None:
                self.storage.set_hard_state(rd.hard_state)
            for e in rd.committed_entries:
                if e.type == EntryType.NORMAL and e.data:
                    self.state.append(e.data)
                self.applied = e.index
            self.node.advance(rd)

    def propose(self, n: int) -> None:
        for i in range(n):
            self.node.propose(f"v{len(self.state) + i}".encode())
            self.run()

    def snapshot(self) -> None:
        cs = self.node.raft.conf_state()
        snap = self.storage.create_snapshot(self.applied, cs, b"|".join(self.state))
        self.snaps.save(snap)
        self.wal.save_snapshot_marker(snap.metadata.index, snap.metadata.term)
        self.wal.release_before(snap.metadata.index)
        self.storage.compact(snap.metadata.index)
        self.snaps.purge(keep=2)


def test_restart_restores_log_state_and_leadership(tmp_path: Path) -> None:
    """Kill (no clean close) and restore: same log, same hard state, and the node works on."""
    with DataDirLock(tmp_path):
        m = Member.new(tmp_path)
        m.propose(30)
        m.snapshot()
        m.propose(40)
        m.snapshot()
        m.propose(25)
        before = (m.storage.first_index(), m.storage.last_index(), m.storage.hard_state, list(m.state))
        entries = m.storage.entries(m.storage.first_index(), m.storage.last_index() + 1, 1 << 62)
        m.wal.close(sync=False)

        m2 = Member.restart(tmp_path)
        r_entries = m2.storage.entries(before[0], before[1] + 1, 1 << 62)
        assert r_entries == entries
        assert m2.storage.snapshot().metadata.index == before[0] - 1
        assert m2.node.raft.term > before[2].term  # it campaigned again
        m2.run()
        assert m2.state == before[3]  # snapshot state + re-applied entries
        m2.propose(5)
        assert len(m2.state) == 100
        assert len(list(wal_dir(tmp_path).glob("*.wal"))) < 10  # released as it went
        m2.wal.close()


def test_fresh_member_restarts_from_the_bootstrap_snapshot(tmp_path: Path) -> None:
    m = Member.new(tmp_path)
    m.propose(3)
    m.wal.close()
    r = restore(tmp_path)
    r.wal.close()
    assert r.snapshot.metadata == SnapshotMetadata(1, 1, ConfState(voters=(1,)))
    assert r.metadata == {"member_id": 1}
    assert r.storage.last_index() == m.storage.last_index()


def test_broken_newest_snapshot_falls_back_to_an_older_one(tmp_path: Path) -> None:
    """If the WAL still holds the entries after the older snapshot, restart uses it."""
    m = Member.new(tmp_path)
    m.propose(10)
    m.snapshot()
    m.propose(10)
    # A second snapshot without releasing the WAL before it.
    snap = m.storage.create_snapshot(m.applied, m.node.raft.conf_state(), b"|".join(m.state))
    path = m.snaps.save(snap)
    m.wal.save_snapshot_marker(snap.metadata.index, snap.metadata.term)
    m.propose(3)
    m.wal.close()
    flip_bit(path, path.stat().st_size - 1, 0)
    r = restore(tmp_path)
    r.wal.close()
    assert r.snapshot.metadata.index < snap.metadata.index
    assert path.with_name(path.name + ".broken").exists()
    assert r.storage.last_index() == m.storage.last_index()
    assert r.storage.term(snap.metadata.index) == snap.metadata.term


def test_missing_snapshot_is_a_recovery_error(tmp_path: Path) -> None:
    m = Member.new(tmp_path)
    m.propose(5)
    m.snapshot()
    m.wal.close()
    for p in snap_dir(tmp_path).iterdir():
        p.unlink()
    with pytest.raises(RecoveryError, match="no readable snapshot"):
        restore(tmp_path)


def test_build_storage_checks_that_pieces_fit(tmp_path: Path) -> None:
    with WAL.create(tmp_path, {}) as w:
        w.save(HardState(1, 1, 2), ents(1, 4))
        w.save_snapshot_marker(2, 1)
    r = replay(tmp_path)
    good = Snapshot(SnapshotMetadata(2, 1, ConfState(voters=(1,))), b"s")
    storage = build_storage(r, good)
    assert (storage.first_index(), storage.last_index(), storage.hard_state) == (3, 4, HardState(1, 1, 2))
    with pytest.raises(RecoveryError, match="snapshot is at index 3"):
        build_storage(r, Snapshot(SnapshotMetadata(3, 1), b""))
    with pytest.raises(RecoveryError):
        build_storage(r, None)
