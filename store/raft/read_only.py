"""Bookkeeping for ReadIndex requests awaiting a heartbeat quorum (raft thesis §6.4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from store.raft.types import Message


@dataclass(slots=True)
class ReadIndexStatus:
    req: Message
    index: int
    acks: set[int] = field(default_factory=set)


class ReadOnly:
    """Pending reads, in arrival order.  A heartbeat quorum for one request confirms
    leadership as of its arrival, and therefore for every request queued before it."""

    __slots__ = ("pending", "queue")

    def __init__(self) -> None:
        self.pending: dict[bytes, ReadIndexStatus] = {}
        self.queue: list[bytes] = []

    def add_request(self, index: int, m: Message) -> None:
        ctx = m.context
        if ctx in self.pending:
            return
        self.pending[ctx] = ReadIndexStatus(req=m, index=index)
        self.queue.append(ctx)

    def recv_ack(self, node_id: int, ctx: bytes) -> set[int] | None:
        rs = self.pending.get(ctx)
        if rs is None:
            return None
        rs.acks.add(node_id)
        return rs.acks

    def advance(self, ctx: bytes) -> list[ReadIndexStatus]:
        """Release `ctx` and every request queued before it."""
        if ctx not in self.pending:
            return []
        i = self.queue.index(ctx)
        released = [self.pending.pop(c) for c in self.queue[: i + 1]]
        del self.queue[: i + 1]
        return released

    def last_pending_request_ctx(self) -> bytes:
        return self.queue[-1] if self.queue else b""
