"""The leader's view of each follower: how far it has replicated and how to send to it.

Flow control per follower follows three states (etcd-io/raft `tracker`, raft thesis §4.2.1):

    PROBE ──(append accepted)──► REPLICATE ──(reject / unreachable)──► PROBE
      │ ▲                                                                  │
      │ └──────────(snapshot applied by follower, or send failed)───┐       │
      └─(next entry compacted away)──► SNAPSHOT ◄───────────────────┴───────┘

* PROBE: at most one append in flight per heartbeat interval, until we learn where the
  follower's log matches ours.
* REPLICATE: optimistic pipelining; `next` advances as we send, bounded by `Inflights`.
* SNAPSHOT: a snapshot is on its way; nothing else is sent until it is applied or fails.
"""

from __future__ import annotations

from collections import deque
from enum import IntEnum


class ProgressState(IntEnum):
    PROBE = 0
    REPLICATE = 1
    SNAPSHOT = 2


class Inflights:
    """A bounded window of in-flight append messages, by last index and size."""

    __slots__ = ("_bytes", "_queue", "max_bytes", "max_count")

    def __init__(self, max_count: int, max_bytes: int) -> None:
        self.max_count = max_count
        self.max_bytes = max_bytes
        self._queue: deque[tuple[int, int]] = deque()
        self._bytes = 0

    def add(self, index: int, size: int) -> None:
        self._queue.append((index, size))
        self._bytes += size

    def free_le(self, index: int) -> None:
        """Release every message whose last index is <= `index` (acknowledged)."""
        q = self._queue
        while q and q[0][0] <= index:
            self._bytes -= q.popleft()[1]

    def full(self) -> bool:
        return len(self._queue) >= self.max_count or self._bytes >= self.max_bytes

    def count(self) -> int:
        return len(self._queue)

    def reset(self) -> None:
        self._queue.clear()
        self._bytes = 0


class Progress:
    """Replication state of one peer, kept by the leader.  Invariant: match < next."""

    __slots__ = (
        "inflights",
        "is_learner",
        "match",
        "msg_app_flow_paused",
        "next",
        "pending_snapshot",
        "recent_active",
        "state",
    )

    def __init__(self, next_index: int, max_inflight: int, max_inflight_bytes: int, is_learner: bool) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.pending_snapshot = 0
        # Heard from since the last CheckQuorum round (leader lease / step-down).
        self.recent_active = False
        # PROBE: one append sent this heartbeat interval; REPLICATE: window full.
        self.msg_app_flow_paused = False
        self.inflights = Inflights(max_inflight, max_inflight_bytes)
        self.is_learner = is_learner

    def __repr__(self) -> str:
        learner = " learner" if self.is_learner else ""
        return f"{self.state.name} match={self.match} next={self.next}{learner}"

    def _reset_state(self, state: ProgressState) -> None:
        self.msg_app_flow_paused = False
        self.pending_snapshot = 0
        self.state = state
        self.inflights.reset()

    def become_probe(self) -> None:
        if self.state == ProgressState.SNAPSHOT:
            pending = self.pending_snapshot
            self._reset_state(ProgressState.PROBE)
            self.next = max(self.match + 1, pending + 1)
        else:
            self._reset_state(ProgressState.PROBE)
            self.next = self.match + 1

    def become_replicate(self) -> None:
        self._reset_state(ProgressState.REPLICATE)
        self.next = self.match + 1

    def become_snapshot(self, snapshot_index: int) -> None:
        self._reset_state(ProgressState.SNAPSHOT)
        self.pending_snapshot = snapshot_index

    def sent_entries(self, count: int, size: int) -> None:
        """Account for an append of `count` entries (`size` bytes) just sent."""
        if self.state == ProgressState.REPLICATE:
            if count > 0:
                self.next += count
                self.inflights.add(self.next - 1, size)
            self.msg_app_flow_paused = self.inflights.full()
        elif self.state == ProgressState.PROBE:
            if count > 0:
                # Nothing more until this probe is answered or the next heartbeat.
                self.msg_app_flow_paused = True

    def maybe_update(self, n: int) -> bool:
        """An append up to `n` was accepted; returns whether match moved forward."""
        updated = False
        if self.match < n:
            self.match = n
            updated = True
            self.msg_app_flow_paused = False
        self.next = max(self.next, n + 1)
        return updated

    def maybe_decr_to(self, rejected: int, match_hint: int) -> bool:
        """An append after index `rejected` was refused; back `next` up to `match_hint`+1.

        Returns False when the rejection is stale (an answer to an older message).
        """
        if self.state == ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False  # not an answer to our latest probe
        self.next = max(min(rejected, match_hint + 1), self.match + 1)
        self.msg_app_flow_paused = False
        return True

    def is_paused(self) -> bool:
        if self.state == ProgressState.SNAPSHOT:
            return True
        return self.msg_app_flow_paused
