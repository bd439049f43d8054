"""The work queue: fair, stingy, and never handing one key to two workers at once.

Three containers carry the whole contract:
* `_queue` - keys waiting for a worker, in the order they were first added (fair);
* `_dirty` - keys that need processing; a key already dirty is not queued again (stingy);
* `_processing` - keys a worker holds; re-adding one only marks it dirty, and `done` queues
  it again, so a second worker can never get it while the first still holds it.

Single event loop, no threads: every method but `get` is synchronous and never yields, so the
three containers are always consistent when another task runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """`get` found the queue shut down and nothing left to hand out."""


class WorkQueue(Generic[K]):
    """A FIFO of keys with de-duplication and per-key mutual exclusion (see the module docstring).

    Metrics, read by a later exporter: `depth` (keys waiting), `adds` (keys newly marked dirty;
    an add that merges into a dirty key is not counted) and `retries` (fed by the rate-limiting
    queue on each `add_rate_limited`).
    """

    def __init__(self) -> None:
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self.adds = 0
        self.retries = 0

    @property
    def depth(self) -> int:
        """Keys waiting for a worker (not counting keys being processed)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def len(self) -> int:
        """Keys waiting for a worker, as client-go's `Len`."""
        return len(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: K) -> None:
        """Mark `key` as needing work; ignored after `shut_down`, merged if already dirty."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self.adds += 1
        if key in self._processing:
            return  # `done` queues it: never two workers on one key
        self._enqueue(key)

    async def get(self) -> K:
        """Wait for a key and hold it until `done(key)`.

        Raises `ShutDown` once the queue is shut down and has nothing left to hand out.
        """
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            await self._wait()
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        """Release `key`; if it was re-added meanwhile, queue it again now.

        Releasing a key that is not held is a no-op, as in client-go.
        """
        self._processing.discard(key)
        if key in self._dirty:
            self._enqueue(key)

    def shut_down(self, *, drain: bool = True) -> None:
        """Refuse new keys and release waiting getters.

        With `drain` (the default, client-go's `ShutDown`) keys already waiting, and keys re-added
        while processing, are still handed out before `get` raises `ShutDown`. With `drain=False`
        they are dropped, so `get` raises at once; keys being processed stay held until `done`.
        """
        self._shutting_down = True
        if not drain:
            self._queue.clear()
            self._dirty.clear()
        while self._waiters:
            self._wake_one()

    def _enqueue(self, key: K) -> None:
        self._queue.append(key)
        self._wake_one()

    def _wake_one(self) -> None:
        """Wake the longest-waiting getter that is still waiting."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _wait(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.cancelled():
                with contextlib.suppress(ValueError):  # `_wake_one` may have skipped it already
                    self._waiters.remove(waiter)  # keeps the list bounded by live getters
            elif self._queue:
                # Woken, then cancelled before taking a key: pass the wake-up on, or that key
                # could sit in the queue while another getter sleeps.
                self._wake_one()
            raise
