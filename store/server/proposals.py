"""Writes on their way through the log: proposed by the leader, answered once applied.

Every proposal carries (origin member, seq) in its entry; when the entry is applied, the
origin's apply loop calls `settle` with the result and the waiting client gets it.
Proposals arriving together are proposed together (one append, one broadcast).  A proposal
that does not commit within the request timeout gets TimeoutError_ (its outcome is
unknown); one overtaken by a leader change gets LeaderChangedError.  No task, future or
timer per request: `expire`, called on every tick, fails overdue waiters in seq order,
which is deadline order (every request gets the same timeout).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from store.api import errors as E
from store.api.cluster import MemberInfo
from store.raft import ConfChange, ConfChangeType
from store.raft.errors import ProposalDroppedError
from store.server.clock import Clock
from store.server.node import RaftNode

MAX_PENDING = 50_000
"""Writes waiting to commit at most; more are refused (too-many-requests), never queued."""
MAX_PENDING_BYTES = 256 << 20
"""Bytes of writes waiting to commit at most (the log holds them until they are applied)."""

Done = Callable[[Any], None]
"""Gets the wire result of an applied write, or the StoreError that ended it."""


@dataclass(slots=True)
class _Pending:
    deadline: float
    done: Done
    size: int = 0


def settles(fut: asyncio.Future[Any]) -> Done:
    """The `done` callback of a waiter that an awaiting handler holds as a future: a
    StoreError result fails it; a second answer (expired, then applied) is ignored."""

    def done(result: Any) -> None:
        if not fut.done():
            if isinstance(result, E.StoreError):
                fut.set_exception(result)
            else:
                fut.set_result(result)

    return done


class Proposals:
    def __init__(
        self,
        member_id: int,
        node: RaftNode,
        clock: Clock,
        timeout: float,
        leader_error: Callable[[], E.StoreError],
    ) -> None:
        self.member_id = member_id
        self.node = node
        self.clock = clock
        self.timeout = timeout
        self.leader_error = leader_error
        self._seq = 0
        self._waiters: dict[int, _Pending] = {}
        """By seq, hence by deadline."""
        self._batch: list[bytes] = []
        self._pending_bytes = 0
        self.committed = 0
        self.failed = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._waiters)

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # ------------------------------------------------------------------ proposing
    def submit(self, kind: str, args: Any, done: Done, forward: bool = False) -> None:
        """Propose a write whose request was checked already; `done` gets the answer.

        On a follower, `forward` hands it to the leader through Raft (etcd's proposal
        forwarding: the etcd API takes writes on any member); the entry still names this
        member as its origin, so this member's apply loop answers it.  Without `forward`, a
        follower refuses it (our own client then goes to the leader itself)."""
        if not self.node.is_leader and not (forward and self.node.has_leader):
            done(self.leader_error())
            return
        if self.node.no_space:
            done(E.NoSpaceError("no space left on the member's disk: writes are refused until space returns"))
            return
        seq = self.next_seq()
        data = self._encode(kind, args, seq)
        if len(self._waiters) >= MAX_PENDING or self._pending_bytes + len(data) > MAX_PENDING_BYTES:
            self.refused += 1
            done(E.TooManyRequestsError("too many requests waiting to commit on this member; retry shortly"))
            return
        self._waiters[seq] = _Pending(self.clock.monotonic() + self.timeout, done, len(data))
        self._pending_bytes += len(data)
        self._enqueue(data)

    async def propose(self, kind: str, args: Any, forward: bool = False) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.submit(kind, args, settles(fut), forward)
        return await fut

    def propose_internal(self, kind: str, args: Any) -> None:
        """A write of the member's own (a lease expiry), answered to nobody (seq 0)."""
        self._enqueue(self._encode(kind, args, 0))

    def _encode(self, kind: str, args: Any, seq: int) -> bytes:
        data: bytes = msgpack.packb([self.member_id, seq, kind, args], use_bin_type=True)
        return data

    def _enqueue(self, data: bytes) -> None:
        first = not self._batch
        self._batch.append(data)
        if first:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        batch, self._batch = self._batch, []
        if not batch:
            return
        try:
            self.node.propose(batch)
        except ProposalDroppedError as e:
            err = E.UnavailableError(f"proposal dropped: {e}")
            for data in batch:
                self.settle(self.member_id, msgpack.unpackb(data)[1], err)
            self.failed += len(batch)

    async def propose_conf_change(self, kind: ConfChangeType, node_id: int, info: MemberInfo | None = None) -> None:
        """Propose a membership change and wait until it is applied, like any other write
        (its context carries our origin and seq, so the apply loop answers exactly it)."""
        if not self.node.is_leader:
            raise self.leader_error()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        seq = self.next_seq()
        context = msgpack.packb([self.member_id, seq, info.to_wire() if info else None], use_bin_type=True)
        self._waiters[seq] = _Pending(self.clock.monotonic() + self.timeout, settles(fut))
        try:
            self.node.propose_conf_change(ConfChange(kind, node_id, context))
        except ProposalDroppedError as e:
            self._waiters.pop(seq, None)
            raise E.UnavailableError(f"membership change refused: {e}") from e
        await fut

    # ------------------------------------------------------------------ answers
    def settle(self, origin: int, seq: int, result: Any) -> None:
        """An entry was applied (or refused): answer its client if we proposed it."""
        if origin != self.member_id or seq == 0:
            return
        pending = self._waiters.pop(seq, None)
        if pending is not None:
            self._pending_bytes -= pending.size
            if not isinstance(result, E.StoreError):
                self.committed += 1
            pending.done(result)

    def expire(self) -> None:
        waiters = self._waiters
        if not waiters:
            return
        now = self.clock.monotonic()
        while waiters:
            seq, pending = next(iter(waiters.items()))
            if pending.deadline > now:
                return
            del waiters[seq]
            self._pending_bytes -= pending.size
            self.failed += 1
            pending.done(
                E.TimeoutError_(
                    f"not committed within {self.timeout:.1f}s (leader cut off from its quorum?); "
                    "the request may or may not be applied"
                )
            )

    def fail_all(self, err: E.StoreError) -> None:
        """This member stopped being the leader: nothing waiting here will be answered."""
        waiters, self._waiters = self._waiters, {}
        self._pending_bytes = 0
        for pending in waiters.values():
            pending.done(err)
