"""The apply half of each Ready: install the leader's snapshot, apply committed entries in
order, answer the writes this member proposed, release the reads whose index is applied.

Applying never stops the member: an entry that cannot be applied (undecodable, refused)
yields the same error on every member (see ReplicatedState.apply), and a membership change
that does not decode or would leave no voter is skipped by every member alike.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable

from store import failpoints
from store.api import errors as E
from store.raft import ConfChange, ConfChangeType, Entry, Ready, SoftState
from store.raft.types import NONE, EntryType
from store.server.apply_log import SNAPSHOT_INSTALLED, ApplyLog
from store.server.clock import Clock
from store.server.node import RaftNode
from store.server.proposals import Proposals
from store.server.reads import ReadIndex
from store.server.snapshots import Snapshots
from store.server.state import ReplicatedState
from store.server.watch_streams import WatchStreams

log = logging.getLogger("raftkube.apply")

FREEZE_EVERY = 20_000
"""Applied entries between two gc.freeze() calls."""


class Applier:
    def __init__(
        self,
        state: ReplicatedState,
        node: RaftNode,
        proposals: Proposals,
        reads: ReadIndex,
        watches: WatchStreams,
        snapshots: Snapshots,
        clock: Clock,
        apply_log: ApplyLog | None,
        on_membership: Callable[[], None],
        on_role_change: Callable[[SoftState], None],
    ) -> None:
        self.state = state
        self.node = node
        self.proposals = proposals
        self.reads = reads
        self.watches = watches
        self.snapshots = snapshots
        self.clock = clock
        self.apply_log = apply_log
        """Test-only evidence for the chaos checker (see store/server/apply_log.py)."""
        self.on_membership = on_membership
        self.on_role_change = on_role_change
        self._frozen_at = 0
        self.snapshots_installed = 0
        self.entries_refused = 0
        """Entries every member refused at apply time (a metric: nonzero means something
        got into the log that the edge should have stopped)."""

    def apply(self, rd: Ready) -> None:
        state = self.state
        alog = self.apply_log
        now = self.clock.monotonic
        if rd.snapshot is not None and rd.snapshot.data:
            self._install(rd)
        fp = failpoints.ENABLED  # once per Ready: the loop below is the hot path
        wrote = False
        settle = self.proposals.settle
        for e in rd.committed_entries:
            if e.type == EntryType.CONF_CHANGE:
                self._apply_conf_change(e)
                state.applied_index = e.index
            elif not e.data:
                state.applied_index = e.index
            else:
                if fp:
                    failpoints.hit("apply-before")
                origin, seq, result = state.apply(e.data, e.index, now())
                if fp:
                    failpoints.hit("apply-after")
                if isinstance(result, E.StoreError) and origin == 0:
                    self.entries_refused += 1
                wrote = True
                settle(origin, seq, result)
            if alog is not None:
                data = e.data if e.type == EntryType.CONF_CHANGE or e.data else b""
                alog.record(e.index, e.term, int(e.type), data, state.kv.current_revision, now())
        if alog is not None:
            alog.flush()
        self.reads.release(rd.read_states, state.applied_index)
        if rd.soft_state is not None:
            # After applying: a write committed in this very Ready still gets its answer
            # before a step-down fails the writes left waiting.
            self.on_role_change(rd.soft_state)
        if wrote:
            self.watches.schedule()
        self.snapshots.maybe_take()
        if state.applied_index - self._frozen_at >= FREEZE_EVERY:
            self.freeze_heap()

    def _install(self, rd: Ready) -> None:
        """A snapshot from the leader replaces our whole state machine."""
        assert rd.snapshot is not None
        meta = rd.snapshot.metadata
        self.state.install(rd.snapshot.data, self.clock.monotonic())
        self.state.applied_index = meta.index
        self.snapshots.installed(meta.index)
        if meta.index > 1:  # not the bootstrap snapshot
            self.snapshots_installed += 1
            log.info("installed a snapshot from the leader at index %d, term %d", meta.index, meta.term)
            if failpoints.ENABLED:
                failpoints.hit("snapshot-after-install")
        self.on_membership()
        if self.apply_log is not None:
            kv = self.state.kv
            self.apply_log.record(
                meta.index, meta.term, SNAPSHOT_INSTALLED, b"", kv.current_revision, self.clock.monotonic()
            )

    def _apply_conf_change(self, e: Entry) -> None:
        if failpoints.ENABLED:
            failpoints.hit("conf-change-before-apply")
        state = self.state
        origin = seq = 0
        try:
            cc = ConfChange.decode(e.data)
            origin, seq, info = state.decode_member_change(cc)
            self._check_conf_change(cc, info is not None)
        except (ValueError, E.StoreError) as err:
            self.entries_refused += 1
            log.error("membership change at index %d is skipped: %s", e.index, err)
            self.proposals.settle(origin, seq, E.InvalidArgumentError(f"membership change refused: {err}"))
            return
        self.node.apply_conf_change(cc)
        state.apply_member_change(cc, info)
        self.proposals.settle(origin, seq, None)
        if cc.type == ConfChangeType.REMOVE_NODE and cc.node_id == state.member_id:
            log.warning("member %d was removed from the cluster; it stops serving", state.member_id)
        self.on_membership()

    def _check_conf_change(self, cc: ConfChange, has_info: bool) -> None:
        """What a change must be for every member to carry it out: same answer everywhere,
        since it depends only on the entry and the replicated membership."""
        voters = set(self.node.status().conf_state.voters)
        if cc.node_id == NONE or cc.node_id >= 1 << 63:
            raise ValueError(f"member id {cc.node_id} is out of range")
        if cc.type == ConfChangeType.REMOVE_NODE:
            if voters == {cc.node_id}:
                raise ValueError(f"removing member {cc.node_id} would leave no voter")
        elif not has_info and cc.node_id not in self.state.members:
            raise ValueError(f"adding member {cc.node_id} without its addresses")

    def freeze_heap(self) -> None:
        """Move every object alive now out of the cyclic garbage collector's sight.

        The state machine holds millions of long-lived objects (every revision of every key);
        a full collection walks all of them (150 ms at 200k revisions) and showed up as the
        p99 write latency.  They are acyclic and live until compaction, so freezing them
        costs nothing; only new objects are scanned from now on."""
        gc.collect(1)
        gc.freeze()
        self._frozen_at = self.state.applied_index
