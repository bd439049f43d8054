"""A simulated network: messages in flight, delivered in any order, or lost.

There is no clock here: the simulator decides which in-flight message is delivered next,
which gives reordering and delay for free.  Links can be blocked one way or both ways.
"""

from __future__ import annotations

import random

from store.raft.types import Message


class SimNetwork:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.inflight: list[Message] = []
        self.blocked: set[tuple[int, int]] = set()
        """Directed links (from, to) that lose every message."""
        self.sent = 0
        self.dropped = 0

    def link_up(self, frm: int, to: int) -> bool:
        return (frm, to) not in self.blocked

    def send(self, m: Message) -> bool:
        """Put `m` on the wire; False when its link is blocked (the message is lost)."""
        self.sent += 1
        if not self.link_up(m.frm, m.to):
            self.dropped += 1
            return False
        self.inflight.append(m)
        return True

    def pick(self) -> int:
        """An in-flight message to act on, biased towards the oldest so nothing starves."""
        n = len(self.inflight)
        if n == 1 or self.rng.random() < 0.5:
            return 0
        return self.rng.randrange(n)

    def take(self, i: int) -> Message:
        return self.inflight.pop(i)

    def isolate(self, node: int, nodes: list[int]) -> None:
        for other in nodes:
            if other != node:
                self.blocked.add((node, other))
                self.blocked.add((other, node))

    def split(self, side_a: list[int], side_b: list[int]) -> None:
        for a in side_a:
            for b in side_b:
                self.blocked.add((a, b))
                self.blocked.add((b, a))

    def block_one_way(self, frm: int, to: int) -> None:
        self.blocked.add((frm, to))

    def heal(self) -> None:
        self.blocked.clear()

    def drop_to(self, node: int) -> list[Message]:
        """A crashed node loses everything that was on its way to it; returns what was lost."""
        lost = [m for m in self.inflight if m.to == node]
        self.inflight = [m for m in self.inflight if m.to != node]
        return lost
