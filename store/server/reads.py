"""Linearizable reads: wait for a ReadIndex round, then for the state machine to reach it.

Reads are batched: every read that arrives while one round is being set up shares it (one
heartbeat round confirms them all).  Any member serves them; a follower's round goes
through the leader.

A round can go unanswered: its message to the leader lost while the peer connection is still
being made (a cluster just started), or dropped by a leader that stepped down.  `retry`, on
the member's clock, asks again for every round older than `RETRY_S`, as etcd's server does;
an answer to an earlier ask of the same round finds it gone and is ignored.  Without it such
a read waited out its whole timeout (5 s at an apiserver's start).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from store import canaries
from store.api import errors as E
from store.raft import ReadState
from store.raft.errors import ProposalDroppedError
from store.server.node import RaftNode

RETRY_S = 0.5


@dataclass
class _ReadBatch:
    ctx: bytes
    fut: asyncio.Future[None]
    index: int = 0
    asked_at: float = 0.0


class ReadIndex:
    def __init__(
        self,
        node: RaftNode,
        timeout: float,
        leader_error: Callable[[], E.StoreError],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node = node
        self.timeout = timeout
        self.leader_error = leader_error
        self.clock = clock
        self._next = 0
        self._forming: _ReadBatch | None = None
        self._inflight: dict[bytes, _ReadBatch] = {}
        self._waiting: list[_ReadBatch] = []

    async def barrier(self) -> None:
        """Return once local state reflects every write committed before this call."""
        if canaries.READ_WITHOUT_READINDEX:
            return  # unsafe on purpose: local state, however stale, as if it were confirmed
        batch = self._forming
        if batch is None:
            self._next += 1
            loop = asyncio.get_running_loop()
            batch = _ReadBatch(b"r%d" % self._next, loop.create_future())
            self._forming = batch
            loop.call_soon(self._start)
        try:
            await asyncio.wait_for(asyncio.shield(batch.fut), self.timeout)
        except TimeoutError:
            raise E.TimeoutError_(
                f"linearizable read not confirmed within {self.timeout:.1f}s (no quorum reachable?)"
            ) from None

    def _start(self) -> None:
        batch, self._forming = self._forming, None
        if batch is not None:
            self._issue(batch)

    def _issue(self, batch: _ReadBatch) -> None:
        batch.asked_at = self.clock()
        try:
            self.node.read_index(batch.ctx)
        except ProposalDroppedError:
            if not batch.fut.done():
                batch.fut.set_exception(self.leader_error())
            return
        self._inflight[batch.ctx] = batch

    def release(self, read_states: list[ReadState], applied: int) -> None:
        """After each applied Ready: rounds the core confirmed wait for their index, and
        every round whose index is applied now lets its reads go."""
        for rs in read_states:
            batch = self._inflight.pop(rs.request_ctx, None)
            if batch is not None:
                batch.index = rs.index
                self._waiting.append(batch)
        if not self._waiting:
            return
        still = []
        for b in self._waiting:
            if b.index <= applied:
                if not b.fut.done():
                    b.fut.set_result(None)
            else:
                still.append(b)
        self._waiting = still

    def retry(self) -> None:
        """Ask again for the rounds unanswered for `RETRY_S` (their ask may have been lost);
        rounds whose reads all gave up are dropped."""
        now = self.clock()
        for ctx, b in list(self._inflight.items()):
            if b.fut.done():
                del self._inflight[ctx]  # every read of it timed out: nobody waits
            elif now - b.asked_at >= RETRY_S:
                del self._inflight[ctx]
                self._issue(b)

    def leader_changed(self) -> None:
        """Rounds asked of a former leader will never be answered: ask again."""
        inflight, self._inflight = self._inflight, {}
        for b in inflight.values():
            self._issue(b)
