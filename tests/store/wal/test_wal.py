"""The WAL's contract: what is saved comes back on open, with MemoryStorage's semantics."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from store.raft.storage import MemoryStorage
from store.raft.types import ConfState, Entry, EntryType, HardState, Snapshot, SnapshotMetadata
from store.wal import WAL, RecoveryError, SnapshotMarker, replay
from tests.store.wal.util import ents, hs, segments


def test_create_then_open_is_empty(tmp_path: Path) -> None:
    """A fresh WAL replays to nothing but its metadata."""
    WAL.create(tmp_path / "wal", {"member_id": 3, "cluster_id": 99}).close()
    w, r = WAL.open(tmp_path / "wal")
    w.close()
    assert r.metadata == {"member_id": 3, "cluster_id": 99}
    assert r.hard_state == HardState()
    assert r.snapshot == SnapshotMarker()
    assert r.entries == []
    assert r.torn == []


def test_create_refuses_an_existing_wal(tmp_path: Path) -> None:
    """Creating over an existing WAL would lose it: refused."""
    WAL.create(tmp_path, {}).close()
    with pytest.raises(FileExistsError):
        WAL.create(tmp_path, {})
    assert WAL.exists(tmp_path)
    assert not WAL.exists(tmp_path / "nothing")


def test_round_trip(tmp_path: Path) -> None:
    """Entries (normal and conf-change, empty and binary payloads) and the last hard state survive."""
    batch = [
        Entry(1, 1, EntryType.CONF_CHANGE, b"\x00\x01cc"),
        Entry(1, 2, EntryType.NORMAL, b""),
        Entry(2, 3, EntryType.NORMAL, bytes(range(256))),
    ]
    with WAL.create(tmp_path, {"m": 1}) as w:
        w.save(hs(term=1, commit=0), batch[:1])
        w.save(hs(term=2, vote=3, commit=1), batch[1:])
        w.save(hs(term=2, vote=3, commit=3), [])
        assert w.last_index == 3
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.entries == batch
    assert all(type(e.type) is EntryType for e in r.entries)
    assert r.hard_state == HardState(term=2, vote=3, commit=3)
    assert r.last_index == 3


def test_reopen_and_append(tmp_path: Path) -> None:
    """Appending after a reopen continues the same log."""
    with WAL.create(tmp_path, {}) as w:
        w.save(hs(), ents(1, 5))
    w, _ = WAL.open(tmp_path)
    with w:
        w.save(hs(commit=5), ents(6, 8))
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.entries == ents(1, 8)
    assert r.hard_state.commit == 5


def test_overwrite_of_a_conflicting_suffix(tmp_path: Path) -> None:
    """A later write at index i replaces i and everything after it, as MemoryStorage.append does."""
    with WAL.create(tmp_path, {}, segment_size=100) as w:  # every save starts a segment
        w.save(hs(term=1), ents(1, 10, term=1))
        w.save(hs(term=2), ents(6, 7, term=2))  # a new leader cut 6..10 back to 6..7
        w.save(None, ents(8, 8, term=2))
        w.save(hs(term=3), ents(3, 4, term=3))  # and another one, reaching into an older segment
    w, r = WAL.open(tmp_path)
    w.close()
    assert len(segments(tmp_path)) > 2
    assert r.entries == ents(1, 2, term=1) + ents(3, 4, term=3)
    assert r.last_index == 4


def test_many_segments_and_rollover(tmp_path: Path) -> None:
    """Segments roll over at the size limit, carry sequence and first index in their names."""
    with WAL.create(tmp_path, {"member_id": 1}, segment_size=4096) as w:
        for lo in range(1, 1001, 10):
            w.save(hs(commit=lo - 1), ents(lo, lo + 9, size=100), sync=False)
    names = [p.name for p in segments(tmp_path)]
    assert len(names) > 20
    seqs = [int(n[:16], 16) for n in names]
    firsts = [int(n[17:33], 16) for n in names]
    assert seqs == list(range(len(names)))
    assert firsts[0] == 1
    assert firsts == sorted(firsts)
    assert all((f - 1) % 10 == 0 for f in firsts)  # a segment starts at a batch boundary
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.entries == ents(1, 1000, size=100)
    assert r.hard_state.commit == 990
    assert r.segments_read == len(names)


def test_release_before_keeps_what_replay_needs(tmp_path: Path) -> None:
    """Segments wholly before the index go; the one holding it stays; replay still works."""
    with WAL.create(tmp_path, {"member_id": 1}, segment_size=2048) as w:
        for lo in range(1, 501, 10):
            w.save(hs(commit=lo + 9), ents(lo, lo + 9, size=100))
        with pytest.raises(ValueError, match="newest snapshot"):
            w.release_before(250)  # no snapshot covers it yet
        w.save_snapshot_marker(250, 1)
        before = segments(tmp_path)
        removed = w.release_before(250)
        assert removed and set(removed) < set(before)
        firsts = [int(p.name[17:33], 16) for p in segments(tmp_path)]
        assert firsts[0] <= 250 < firsts[1]
        assert w.release_before(250) == []  # idempotent
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.snapshot == SnapshotMarker(250, 1)
    assert r.entries == ents(251, 500, size=100)
    assert r.segments_read == len(segments(tmp_path))
    assert r.metadata == {"member_id": 1}


def test_release_never_removes_the_current_segment(tmp_path: Path) -> None:
    """Even a release past everything keeps the segment being written."""
    with WAL.create(tmp_path, {}) as w:
        w.save(hs(), ents(1, 5))
        w.save_snapshot_marker(5, 1)
        assert w.release_before(6) == []
        assert len(segments(tmp_path)) == 1


def test_restart_reads_only_segments_after_the_snapshot(tmp_path: Path) -> None:
    """Replay is bounded: history before the newest snapshot's segment is not read."""
    with WAL.create(tmp_path, {}, segment_size=2048) as w:
        for lo in range(1, 1001, 10):
            w.save(hs(commit=lo + 9), ents(lo, lo + 9, size=100), sync=False)
        w.save_snapshot_marker(950, 1)
    firsts = [int(p.name[17:33], 16) for p in segments(tmp_path)]
    w, r = WAL.open(tmp_path)
    w.close()
    start = max(i for i, f in enumerate(firsts) if f <= 951)  # the segment that holds entry 951
    assert len(firsts) > 40
    assert r.segments_read == len(firsts) - start <= 5
    assert r.entries == ents(951, 1000, size=100)
    # Older history is still there (not released) and can be asked for explicitly.
    older = replay(tmp_path, after=SnapshotMarker(100, 1))
    assert older.entries == ents(101, 1000, size=100)
    assert older.latest_snapshot == SnapshotMarker(950, 1)


def test_snapshot_marker_keeps_later_entries(tmp_path: Path) -> None:
    """A local snapshot marker at i keeps the entries after i, even those written before it."""
    with WAL.create(tmp_path, {}) as w:
        w.save(hs(commit=8), ents(1, 10))
        w.save_snapshot_marker(8, 1)
        assert w.snapshot == SnapshotMarker(8, 1)
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.snapshot == SnapshotMarker(8, 1)
    assert r.entries == ents(9, 10)


def test_durable_snapshot_follows_fdatasync(tmp_path: Path) -> None:
    """`durable_snapshot` is the newest marker written before the last fdatasync (or replayed)."""
    with WAL.create(tmp_path, {}) as w:
        w.save(hs(commit=8), ents(1, 10))
        w.save_snapshot_marker(4, 1)
        assert w.durable_snapshot == w.snapshot == SnapshotMarker(4, 1)
        w.save_snapshot_marker(8, 1, sync=False)
        w.save(hs(commit=9), [], sync=False, snapshot=SnapshotMarker(9, 1))
        assert w.snapshot == SnapshotMarker(9, 1)
        assert w.durable_snapshot == SnapshotMarker(4, 1)
        w.sync()
        assert w.durable_snapshot == SnapshotMarker(9, 1)
    w, _ = WAL.open(tmp_path)
    w.close()
    assert w.durable_snapshot == SnapshotMarker(9, 1)


def test_installed_snapshot_replaces_the_log(tmp_path: Path) -> None:
    """A snapshot from the leader (save(snapshot=...)) discards the log, as MemoryStorage.apply_snapshot."""
    with WAL.create(tmp_path, {}) as w:
        w.save(hs(term=1), ents(1, 30, term=1))
        w.save(hs(term=2, commit=20), [], snapshot=SnapshotMarker(20, 2))
        w.save(None, ents(21, 22, term=2))
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.snapshot == SnapshotMarker(20, 2)
    assert r.entries == ents(21, 22, term=2)
    assert r.hard_state == hs(term=2, commit=20)


def test_installed_snapshot_beyond_the_log_with_entries_in_the_same_save(tmp_path: Path) -> None:
    """Snapshot + entries + hard state of one Ready go in one save."""
    with WAL.create(tmp_path, {}) as w:
        w.save(hs(), ents(1, 5))
        w.save(hs(term=4, commit=100), ents(101, 103, term=4), snapshot=SnapshotMarker(100, 3))
        assert w.last_index == 103
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.snapshot == SnapshotMarker(100, 3)
    assert r.entries == ents(101, 103, term=4)


def test_an_older_snapshot_cannot_be_used_across_an_installed_one(tmp_path: Path) -> None:
    """Replaying after snapshot 5 when a later install replaced the log is refused, not guessed."""
    with WAL.create(tmp_path, {}) as w:
        w.save(hs(), ents(1, 10))
        w.save_snapshot_marker(5, 1)
        w.save(hs(commit=50), [], snapshot=SnapshotMarker(50, 2))
    with pytest.raises(RecoveryError, match="replaced the log"):
        replay(tmp_path, after=SnapshotMarker(5, 1))


def test_save_validates_its_input(tmp_path: Path) -> None:
    """Gaps, non-contiguous batches and stale snapshots are programming errors."""
    with WAL.create(tmp_path, {}) as w:
        w.save(hs(), ents(1, 5))
        with pytest.raises(ValueError, match="gap"):
            w.save(None, ents(7, 8))
        with pytest.raises(ValueError, match="contiguous"):
            w.save(None, [*ents(6, 6), *ents(8, 8)])
        w.save_snapshot_marker(3, 1)
        with pytest.raises(ValueError, match="not newer"):
            w.save_snapshot_marker(3, 1)
        with pytest.raises(ValueError, match="beyond the last index"):
            w.save_snapshot_marker(6, 1)
        with pytest.raises(ValueError, match="not newer"):
            w.save(None, [], snapshot=SnapshotMarker(2, 1))
    with pytest.raises(ValueError, match="closed"):
        w.save(hs(), [])
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.entries == ents(4, 5)


def test_empty_save_only_syncs(tmp_path: Path) -> None:
    """save(None, []) writes nothing; with sync it flushes earlier unsynced writes."""
    with WAL.create(tmp_path, {}) as w:
        size = segments(tmp_path)[0].stat().st_size
        w.save(None, [], sync=True)
        assert segments(tmp_path)[0].stat().st_size == size
        w.save(None, ents(1, 1), sync=False)
        w.save(None, [])


def test_randomized_against_memory_storage(tmp_path: Path) -> None:
    """Random appends, overwrites, local and installed snapshots, releases and reopens:
    after every reopen the replay equals a MemoryStorage that saw the same operations."""
    for seed in range(12):
        rng = random.Random(seed)
        d = tmp_path / str(seed)
        ms = MemoryStorage()
        w = WAL.create(d, {"seed": seed}, segment_size=rng.choice([256, 1024, 8192]))
        term = 1
        for _step in range(150):
            op = rng.random()
            if op < 0.6:
                lo = rng.randint(max(ms.first_index() - 2, 1), ms.last_index() + 1)
                term += rng.random() < 0.2
                batch = ents(lo, lo + rng.randint(0, 6), term=term, size=rng.choice([0, 10, 200]))
                state = hs(term=term, commit=min(ms.snapshot().metadata.index, ms.last_index()))
                w.save(state, batch, sync=rng.random() < 0.3)
                ms.append(batch)
                ms.set_hard_state(state)
            elif op < 0.75 and ms.last_index() > ms.snapshot().metadata.index:
                i = rng.randint(ms.snapshot().metadata.index + 1, ms.last_index())
                w.save_snapshot_marker(i, ms.term(i), sync=False)
                ms.create_snapshot(i, ConfState(voters=(1,)), b"")
                ms.compact(i)
                w.release_before(i + rng.choice([0, 1]) if rng.random() < 0.5 else i // 2)
            elif op < 0.82:
                i = ms.snapshot().metadata.index + rng.randint(1, 8)
                term += 1
                w.save(hs(term=term, commit=i), [], snapshot=SnapshotMarker(i, term))
                ms.apply_snapshot(Snapshot(SnapshotMetadata(i, term, ConfState(voters=(1,)))))
                ms.set_hard_state(hs(term=term, commit=i))
            else:
                w.close()
                w, r = WAL.open(d, segment_size=w.segment_size)
                _check(r, ms)
        w.close()
        w, r = WAL.open(d)
        w.close()
        _check(r, ms)


def _check(r: object, ms: MemoryStorage) -> None:
    from store.wal import ReplayResult

    assert isinstance(r, ReplayResult)
    snap = ms.snapshot().metadata
    assert (r.snapshot.index, r.snapshot.term) == (snap.index, snap.term)
    assert r.entries == ms.entries(ms.first_index(), ms.last_index() + 1, 1 << 62)
    assert r.hard_state == ms.hard_state
    assert r.last_index == ms.last_index()


@pytest.mark.parametrize("fails", ["open", "write", "fsync"])
def test_a_segment_cut_that_runs_out_of_descriptors_leaves_the_wal_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """20,000 idle client sockets used to make the next segment's open fail with EMFILE,
    which stopped the member for good.  Now the failed save changes nothing, is retried, and
    goes through once a descriptor is free."""
    import errno

    from machinery.process import disk
    from store.wal.errors import DiskWriteError

    w = WAL.create(tmp_path, {}, segment_size=100)  # every save starts a segment
    w.save(hs(1, 1), ents(1, 2))
    real = {"open": disk.open_append, "write": disk.write, "fsync": disk.fdatasync}
    name = {"open": "open_append", "write": "write", "fsync": "fdatasync"}[fails]

    def out_of_descriptors(*args: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(disk, name, out_of_descriptors)
    with pytest.raises(DiskWriteError) as e:
        w.save(hs(1, 1), ents(3, 3))
    assert e.value.errno == errno.EMFILE
    monkeypatch.setattr(disk, name, real[fails])
    w.save(hs(1, 1), ents(3, 3))  # the same write, retried: the WAL took no harm
    w.close()
    _, r = WAL.open(tmp_path)
    assert [e.index for e in r.entries] == [1, 2, 3]
    assert not list(tmp_path.glob("*.tmp"))
