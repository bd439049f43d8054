"""A clock whose time moves only when a test says so."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeClock:
    """`now()` stands still; `advance(s)` moves it and wakes every sleeper due by then."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.t + max(0.0, seconds), next(self._seq), fut))
        await fut

    def sleepers(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking sleepers in deadline order, and let woken tasks run."""
        target = self.t + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            due, _, fut = heapq.heappop(self._sleepers)
            self.t = max(self.t, due)
            if not fut.done():
                fut.set_result(None)
            for _ in range(5):
                await asyncio.sleep(0)
        self.t = target
        for _ in range(5):
            await asyncio.sleep(0)
