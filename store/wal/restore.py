"""Restarting a member from its data dir: newest usable snapshot + the WAL after it.

with DataDirLock(data_dir):
    if WAL.exists(wal_dir(data_dir)):
        r = restore(data_dir)          # r.storage feeds RawNode(Config(storage=..., applied=...))
    else:
        wal = WAL.create(wal_dir(data_dir), {"member_id": ..., "cluster_id": ...})
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store.raft.storage import MemoryStorage
from store.raft.types import EMPTY_SNAPSHOT, HardState, Snapshot
from store.wal.errors import RecoveryError
from store.wal.reader import ReplayResult
from store.wal.record import SnapshotMarker
from store.wal.snapshotter import Snapshotter
from store.wal.wal import DEFAULT_SEGMENT_SIZE, WAL

log = logging.getLogger(__name__)

WAL_DIR = "wal"
SNAP_DIR = "snap"


def wal_dir(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / WAL_DIR


def snap_dir(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / SNAP_DIR


@dataclass(slots=True)
class Restored:
    wal: WAL
    """Open and ready to append."""
    storage: MemoryStorage
    snapshot: Snapshot
    """The snapshot the storage starts from (EMPTY_SNAPSHOT if none): the state machine's base."""
    metadata: dict[str, Any]
    replay: ReplayResult


def build_storage(replay: ReplayResult, snapshot: Snapshot | None) -> MemoryStorage:
    """A MemoryStorage holding exactly what is on disk: snapshot, the entries after it, hard state."""
    snap = snapshot if snapshot is not None else EMPTY_SNAPSHOT
    md = snap.metadata
    if (md.index, md.term) != (replay.snapshot.index, replay.snapshot.term):
        raise RecoveryError(
            f"the WAL replay follows index {replay.snapshot.index} term {replay.snapshot.term}, "
            f"the snapshot is at index {md.index} term {md.term}"
        )
    storage = MemoryStorage()
    if not snap.is_empty:
        storage.apply_snapshot(snap)
    storage.append(replay.entries)
    hs = replay.hard_state
    if hs != HardState() and not md.index <= hs.commit <= storage.last_index():
        raise RecoveryError(
            f"persisted commit index {hs.commit} is outside the restored log [{md.index}, {storage.last_index()}]"
        )
    storage.set_hard_state(hs)
    return storage


def restore(data_dir: str | os.PathLike[str], *, segment_size: int = DEFAULT_SEGMENT_SIZE) -> Restored:
    """Open the WAL (repairing a torn tail), load the snapshot it needs, rebuild the storage.

    If the newest snapshot file is unreadable (renamed `.broken`), an older one is used, as
    long as the WAL still holds the entries after it; otherwise RecoveryError.
    """
    wal, replay = WAL.open(wal_dir(data_dir), segment_size=segment_size)
    try:
        snapshot: Snapshot | None = None
        want = replay.snapshot
        if want.index > 0:
            snapshot = Snapshotter(snap_dir(data_dir)).load_newest(max_index=want.index)
            if snapshot is None:
                raise RecoveryError(
                    f"the WAL needs the snapshot at index {want.index} (term {want.term}) and {snap_dir(data_dir)} "
                    f"has no readable snapshot at or before it"
                )
            md = snapshot.metadata
            if md.index < want.index:
                log.warning("the snapshot at index %d is unusable; replaying from the one at %d", want.index, md.index)
                wal.close()
                wal, replay = WAL.open(
                    wal_dir(data_dir), after=SnapshotMarker(md.index, md.term), segment_size=segment_size
                )
        storage = build_storage(replay, snapshot)
    except BaseException:
        wal.close()
        raise
    return Restored(wal, storage, snapshot or EMPTY_SNAPSHOT, replay.metadata, replay)
