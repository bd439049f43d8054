"""Snapshots of the member's own state machine: when to take one, and taking it without
holding up the Raft loop (the file is written on the disk thread; the WAL marker and the
release of the log before it happen between two Readies, once the file is durable)."""

from __future__ import annotations

import asyncio
import logging

from store import failpoints
from store.server.node import RaftNode
from store.server.persistence import Persistence
from store.server.state import ReplicatedState

log = logging.getLogger("raftkube.snapshots")


class Snapshots:
    def __init__(
        self,
        state: ReplicatedState,
        node: RaftNode,
        persistence: Persistence,
        every: int,
        catchup_entries: int,
        last_index: int,
    ) -> None:
        self.state = state
        self.node = node
        self.persistence = persistence
        self.every = every
        """Applied entries between two snapshots."""
        self.catchup_entries = catchup_entries
        """Entries kept in the log behind a snapshot, so slightly lagging followers need none."""
        self.last_index = last_index

    def installed(self, index: int) -> None:
        """The state was replaced by the leader's snapshot at `index`."""
        self.last_index = index

    def maybe_take(self) -> None:
        if self.state.applied_index - self.last_index >= self.every:
            self.take()

    def take(self) -> None:
        """Snapshot the state machine at the applied index; release the log before it."""
        applied = self.state.applied_index
        data = self.state.snapshot()
        p = self.persistence
        snap = p.storage.create_snapshot(applied, self.node.status().conf_state, data)
        self.last_index = applied
        compact_to = applied - self.catchup_entries
        if failpoints.ENABLED:
            failpoints.hit("snapshot-before-save")
        node = self.node
        fut = asyncio.get_running_loop().run_in_executor(node.disk_thread, p.save_snapshot_file, snap)

        def record() -> None:
            # Between two Readies (the WAL has one writer), and only once the snapshot file
            # is durable, may the WAL point at it and the log (and WAL) before it go.
            if failpoints.ENABLED:
                failpoints.hit("snapshot-after-save")
            p.record_snapshot(snap)
            if compact_to > p.storage.first_index():
                p.storage.compact(compact_to)
                p.release_wal_before(compact_to)

        def saved(f: asyncio.Future[None]) -> None:
            if f.cancelled() or f.exception() is not None:
                log.error("saving the snapshot at %d failed: %s", applied, f.exception())
                return
            node.defer(record)

        fut.add_done_callback(saved)
