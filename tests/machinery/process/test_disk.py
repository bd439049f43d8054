"""The disk layer's test mode: fsynced-length tracking for crash simulation, and fault injection."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from machinery.process import disk
from store.wal import WAL, DiskWriteError, Snapshotter, replay
from tests.store.wal.test_snapshotter import snap
from tests.store.wal.util import ents, hs, segments
from tests.support.paths import ROOT


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "ledger.jsonl"
    disk.enable_test_mode(ledger=path)
    yield path
    disk.disable_test_mode()


def test_production_functions_when_disabled() -> None:
    """Without test mode the layer is the bare os calls (plus at most one Python frame)."""
    if os.environ.get(disk.TRACK_ENV) or os.environ.get(disk.FAULT_FILE_ENV):
        pytest.skip("the suite runs with the disk layer in test mode")
    assert not disk.in_test_mode()
    assert disk.write is disk._write
    assert disk.fsync is os.fsync
    with pytest.raises(RuntimeError):
        disk.set_fault("enospc")


def test_tracking_records_fsynced_lengths(tmp_path: Path, ledger: Path) -> None:
    """Each fdatasync records the file's durable length; unsynced writes do not move it."""
    w = WAL.create(tmp_path / "wal", {})
    seg = str(segments(tmp_path / "wal")[0])
    w.save(hs(), ents(1, 3), sync=True)
    synced = disk.synced_lengths()[seg]
    assert synced == os.path.getsize(seg)
    w.save(hs(commit=3), ents(4, 6), sync=False)
    assert disk.synced_lengths()[seg] == synced < os.path.getsize(seg)
    w.close(sync=False)
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert {"path": seg, "synced": synced} in lines


def test_crash_simulation_loses_only_unsynced_records(tmp_path: Path, ledger: Path) -> None:
    """Truncating to the fsynced lengths after a crash drops exactly the saves made with sync=False."""
    d = tmp_path / "wal"
    w = WAL.create(d, {}, segment_size=1000)
    for lo in range(1, 40, 3):
        w.save(hs(commit=lo - 1), ents(lo, lo + 2), sync=True)
    n = len(w.segments)
    w.save(hs(commit=99), ents(40, 41), sync=False)
    w.save(None, ents(42, 42), sync=False)
    assert len(w.segments) == n  # no rollover (which would have synced them)
    cut = disk.simulate_crash(ledger)  # the "power loss"
    w.close(sync=False)
    disk.disable_test_mode()
    assert list(cut) == [str(segments(d)[-1])]
    w, r = WAL.open(d)
    w.close()
    assert r.torn == []  # cut at a record boundary: fsync happens after whole records
    assert r.entries == ents(1, 39)
    assert r.hard_state == hs(commit=36)


CHILD = """
import sys, time
from store.raft.types import Entry, HardState
from store.wal import WAL
w = WAL.create(sys.argv[1], {"member_id": 1})
w.save(HardState(1, 1, 0), [Entry(1, i, data=b"a" * 300) for i in range(1, 11)], sync=True)
w.save(HardState(1, 1, 10), [Entry(1, i, data=b"b" * 300) for i in range(11, 21)], sync=False)
print("saved", flush=True)
time.sleep(60)
"""


def test_env_var_tracking_across_a_sigkill(tmp_path: Path) -> None:
    """A member started with RAFTKUBE_DISK_TRACK and SIGKILLed: the harness drops what was never fsynced."""
    ledger = tmp_path / "ledger.jsonl"
    d = tmp_path / "wal"
    env = {**os.environ, disk.TRACK_ENV: str(ledger)}
    cmd = [sys.executable, "-c", CHILD, str(d)]
    child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "saved"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert len(replay(d).entries) == 20  # the page cache still has both saves
    cut = disk.simulate_crash(ledger)
    assert list(cut) == [str(segments(d)[0])]
    w, r = WAL.open(d)
    w.close()
    assert [e.index for e in r.entries] == list(range(1, 11))
    assert r.hard_state.commit == 0


def test_snapshot_files_are_tracked_through_rename(tmp_path: Path, ledger: Path) -> None:
    """A snapshot is fsynced before its rename: after a crash it is whole."""
    path = Snapshotter(tmp_path / "snap").save(snap(5))
    assert disk.synced_lengths()[str(path)] == path.stat().st_size
    assert disk.simulate_crash(ledger) == {}


def test_disk_full_leaves_durable_content_intact(tmp_path: Path, ledger: Path) -> None:
    """ENOSPC fails the save with a typed error; the log stays whole and usable once space returns."""
    d = tmp_path / "wal"
    w = WAL.create(d, {})
    w.save(hs(), ents(1, 5))
    size = segments(d)[0].stat().st_size
    for fault in ("enospc", "enospc-partial"):
        disk.set_fault(fault)
        with pytest.raises(DiskWriteError) as exc:
            w.save(hs(commit=5), ents(6, 10))
        assert exc.value.errno == errno.ENOSPC
        assert segments(d)[0].stat().st_size == size  # a partial write was rolled back
        disk.set_fault(None)
        w2, r = WAL.open(d)  # what a restart would see right now
        w2.close()
        assert r.entries == ents(1, 5)
        assert r.torn == []
    w.save(hs(commit=5), ents(6, 10))  # space is back: the same save succeeds
    w.close()
    w, r = WAL.open(d)
    w.close()
    assert r.entries == ents(1, 10)


def test_disk_full_while_starting_a_segment(tmp_path: Path, ledger: Path) -> None:
    """A failed rollover leaves no half segment behind and is retried by the next save."""
    d = tmp_path / "wal"
    w = WAL.create(d, {}, segment_size=100)
    w.save(hs(), ents(1, 5))
    disk.set_fault("enospc")
    with pytest.raises(DiskWriteError, match="creating segment"):
        w.save(hs(), ents(6, 6))
    disk.set_fault(None)
    assert len(segments(d)) == 1
    assert not list(d.glob("*.tmp"))
    w.save(hs(), ents(6, 6))
    w.close()
    assert len(segments(d)) == 2
    w, r = WAL.open(d)
    w.close()
    assert r.entries == ents(1, 6)


def test_fault_flag_file(tmp_path: Path) -> None:
    """A harness in another process switches disk-full on and off with a flag file."""
    flag = tmp_path / "full"
    disk.enable_test_mode(fault_file=flag)
    try:
        w = WAL.create(tmp_path / "wal", {})
        w.save(hs(), ents(1, 1))
        flag.write_text("enospc\n")
        with pytest.raises(DiskWriteError):
            w.save(hs(), ents(2, 2))
        flag.unlink()
        w.save(hs(), ents(2, 2))
        w.close()
    finally:
        disk.disable_test_mode()


def test_failed_fsync_makes_the_wal_refuse_further_work(tmp_path: Path, ledger: Path) -> None:
    """After a failed fdatasync nothing more is accepted: the member must restart from disk."""
    d = tmp_path / "wal"
    w = WAL.create(d, {})
    w.save(hs(), ents(1, 3))
    disk.set_fault("eio-fsync")
    with pytest.raises(DiskWriteError) as exc:
        w.save(hs(), ents(4, 6))
    assert exc.value.errno == errno.EIO
    disk.set_fault(None)
    with pytest.raises(DiskWriteError, match="unusable"):
        w.save(hs(), ents(4, 6))
    w.close()
    w, r = WAL.open(d)
    w.close()
    assert r.entries[:3] == ents(1, 3)
