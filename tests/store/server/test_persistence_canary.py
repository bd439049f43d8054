"""A member's durable state under the ack-before-fsync canary, driven as the member drives it
(bootstrap Ready, election, client writes, its own snapshots every few hundred entries),
then a power loss simulated with the disk layer's ledger: the canary must lose the
acknowledged client writes and nothing else, so that the member restarts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from machinery.process import disk
from store import canaries
from store.raft import Ready
from store.raft.types import ConfState, Entry, HardState, Snapshot, SnapshotMetadata
from store.server.persistence import SNAPSHOTS_KEPT, Persistence

MEMBER, CLUSTER = 1, 99
CONF = ConfState(voters=(1, 2, 3))
SNAPSHOT_EVERY = 300


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "ledger.jsonl"
    disk.enable_test_mode(ledger=path)
    try:
        yield path
    finally:
        disk.disable_test_mode()


@pytest.fixture(params=[False, True], ids=["fsync", "ack-before-fsync"])
def unsafe(request: pytest.FixtureRequest) -> Iterator[bool]:
    canaries.configure("ack-before-fsync" if request.param else "")
    try:
        yield request.param
    finally:
        canaries.configure(os.environ.get(canaries.ENV, ""))


def run_member(data_dir: Path, client_writes: int) -> None:
    """What a member's Raft loop hands its persistence, then a SIGKILL (no clean close)."""
    p = Persistence.open(data_dir, MEMBER, CLUSTER)
    assert p.is_new
    bootstrap = Snapshot(SnapshotMetadata(index=1, term=1, conf_state=CONF), b"initial state")
    p.save_snapshot_file(bootstrap)
    p.persist_ready(Ready(hard_state=HardState(term=1, vote=0, commit=1), snapshot=bootstrap, must_sync=True))
    p.persist_ready(Ready(hard_state=HardState(term=2, vote=1, commit=1), must_sync=True))
    for index in range(2, client_writes + 2):
        entry = Entry(term=2, index=index, data=b"put k%d" % index)
        p.persist_ready(Ready(hard_state=HardState(term=2, vote=1, commit=index), entries=[entry], must_sync=True))
        if index % SNAPSHOT_EVERY == 0:  # the member's own snapshot, as Member._snapshot does
            snap = Snapshot(SnapshotMetadata(index=index, term=2, conf_state=CONF), b"state at %d" % index)
            p.save_snapshot_file(snap)
            p.record_snapshot(snap)
            p.release_wal_before(index - 10)
    # SIGKILL: nothing more is written or synced, the lock goes with the process.
    p.wal.close(sync=False)
    p.lock.release()


def test_a_crash_loses_only_client_writes(tmp_path: Path, ledger: Path, unsafe: bool) -> None:
    """More member snapshots than are kept (so the bootstrap one is purged), then a crash:
    the member restarts either way; without the canary with every write, with it with
    none of the client writes but with its term and vote."""
    writes = SNAPSHOT_EVERY * (SNAPSHOTS_KEPT + 2) + 17
    data_dir = tmp_path / "member"
    run_member(data_dir, writes)
    disk.simulate_crash(ledger)

    p = Persistence.open(data_dir, MEMBER, CLUSTER)  # raised RecoveryError before the fix
    try:
        hs = p.storage.hard_state
        assert (hs.term, hs.vote) == (2, 1)
        assert p.snapshot is not None
        if unsafe:
            assert p.snapshot.metadata.index == 1
            assert p.snapshot.data == b"initial state"
            assert p.storage.last_index() == 1, "a client write was fsynced under the canary"
        else:
            assert p.snapshot.metadata.index == SNAPSHOT_EVERY * (SNAPSHOTS_KEPT + 2)
            assert p.storage.last_index() == writes + 1
    finally:
        p.close()
