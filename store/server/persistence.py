"""A member's durable state: data-dir lock, WAL and snapshot files, and the in-memory log
rebuilt from them.  The WAL is written from the event loop thread only; snapshot files may
be written from the disk thread."""

from __future__ import annotations

import logging
from pathlib import Path

from machinery.process import disk
from store import canaries, failpoints
from store.raft import Ready
from store.raft.storage import MemoryStorage
from store.raft.types import EntryType, Snapshot
from store.wal.errors import RecoveryError
from store.wal.lock import DataDirLock
from store.wal.record import SnapshotMarker
from store.wal.restore import restore, snap_dir, wal_dir
from store.wal.snapshotter import Snapshotter
from store.wal.wal import WAL

log = logging.getLogger("raftkube.persistence")

SNAPSHOTS_KEPT = 3
BOOTSTRAP_INDEX = 1
"""`RawNode.bootstrap` hands a new cluster its initial membership as a snapshot at index 1."""


class Persistence:
    def __init__(
        self,
        lock: DataDirLock,
        wal: WAL,
        snapshotter: Snapshotter,
        storage: MemoryStorage,
        snapshot: Snapshot | None,
        is_new: bool,
        fsync: bool,
    ) -> None:
        self.lock = lock
        self.wal = wal
        self.snapshotter = snapshotter
        self.storage = storage
        self.snapshot = snapshot
        """The snapshot the member restarts from (None for a new member)."""
        self.is_new = is_new
        self.fsync = fsync
        self._synced_term_vote = (-1, -1)

    @classmethod
    def open(cls, data_dir: Path, member_id: int, cluster_id: int, fsync: bool = True) -> Persistence:
        """Lock the data dir, then restore from it (or create an empty WAL for a new member)."""
        disk.make_dirs(data_dir)
        lock = DataDirLock(data_dir).acquire()
        try:
            snapshotter = Snapshotter(snap_dir(data_dir))
            if WAL.exists(wal_dir(data_dir)):
                r = restore(data_dir)
                found = r.metadata.get("member_id"), r.metadata.get("cluster_id")
                if found != (member_id, cluster_id):
                    raise RecoveryError(
                        f"{data_dir} belongs to member {found[0]} of cluster {found[1]}, "
                        f"not member {member_id} of cluster {cluster_id}"
                    )
                snap = None if r.snapshot.is_empty else r.snapshot
                if canaries.ACK_BEFORE_FSYNC:
                    # What survived the last run is this run's durable base (the canary never
                    # fsyncs client writes, so after a clean stop they may still be unsynced);
                    # the snapshot marker it replayed is then the one `wal.durable_snapshot` names.
                    r.wal.sync()
                return cls(lock, r.wal, snapshotter, r.storage, snap, is_new=False, fsync=fsync)
            wal = WAL.create(wal_dir(data_dir), {"member_id": member_id, "cluster_id": cluster_id})
            return cls(lock, wal, snapshotter, MemoryStorage(), None, is_new=True, fsync=fsync)
        except BaseException:
            lock.release()
            raise

    def save_snapshot_file(self, snap: Snapshot) -> None:
        """Write a snapshot file (fsynced).  Safe on another thread: it touches only snap/."""
        self.snapshotter.save(snap)

    def persist_ready(self, rd: Ready) -> None:
        """One WAL record for the Ready (its snapshot file, if any, is already saved)."""
        marker = None
        if rd.snapshot is not None:
            marker = SnapshotMarker(rd.snapshot.metadata.index, rd.snapshot.metadata.term)
        sync = rd.must_sync and self.fsync
        if sync and canaries.ACK_BEFORE_FSYNC:
            sync = self._canary_fsync_due(rd)
        if failpoints.ENABLED:
            self._persist_with_failpoints(rd, sync, marker)
            return
        self.wal.save(rd.hard_state, rd.entries, sync=sync, snapshot=marker)

    def _canary_fsync_due(self, rd: Ready) -> bool:
        """The ack-before-fsync canary's policy: fsync only what a restart, an election and
        the membership need (the bootstrap snapshot, a new term or vote, conf changes);
        client writes are acknowledged without ever being fsynced.  A crash then loses
        acknowledged writes while the prefix that survives stays consistent, so the cluster
        restarts and the loss can be seen.

        Snapshot markers are not fsynced: the WAL is one append-only file and a crash keeps
        a prefix of it, so a durable marker would make every client write before it durable
        too.  Instead the snapshot files and WAL segments that the durable marker needs are
        kept (`record_snapshot`, `release_wal_before`)."""
        hs = rd.hard_state
        due = (
            (rd.snapshot is not None and rd.snapshot.metadata.index == BOOTSTRAP_INDEX)
            or (hs is not None and (hs.term, hs.vote) != self._synced_term_vote)
            or any(e.type != EntryType.NORMAL for e in rd.entries)
        )
        if due and hs is not None:
            self._synced_term_vote = (hs.term, hs.vote)
        return due

    def _persist_with_failpoints(self, rd: Ready, sync: bool, marker: SnapshotMarker | None) -> None:
        """`persist_ready` split into write and fsync, so a fault can land in between."""
        failpoints.hit("wal-before-append")
        self.wal.save(rd.hard_state, rd.entries, sync=False, snapshot=marker)
        failpoints.hit("wal-after-append")
        if sync:
            self.wal.sync()
        failpoints.hit("wal-after-fsync")

    def record_snapshot(self, snap: Snapshot) -> None:
        """After the member's own snapshot file is saved: point the WAL at it, drop old files."""
        if canaries.ACK_BEFORE_FSYNC:
            # No fsync: that would flush the client writes before the marker.  So after a
            # crash the WAL may point at an older marker: its snapshot file must stay.
            self.wal.save_snapshot_marker(snap.metadata.index, snap.metadata.term, sync=False)
            self.snapshotter.purge(keep=SNAPSHOTS_KEPT, needed=self.wal.durable_snapshot.index)
            return
        self.wal.save_snapshot_marker(snap.metadata.index, snap.metadata.term, sync=self.fsync)
        self.snapshotter.purge(keep=SNAPSHOTS_KEPT)

    def release_wal_before(self, index: int) -> None:
        # Replay needs every entry after the snapshot marker; under the canary, after the
        # durable one (the newest may be lost in a crash).
        marker = self.wal.durable_snapshot if canaries.ACK_BEFORE_FSYNC else self.wal.snapshot
        index = min(index, marker.index + 1)
        for path in self.wal.release_before(index):
            log.info("released WAL segment %s", path.name)

    def close(self) -> None:
        try:
            self.wal.close(sync=not canaries.ACK_BEFORE_FSYNC)
        finally:
            self.lock.release()
