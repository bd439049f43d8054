"""The work queue's interface, and a base for queues that wrap another one and add a method.

client-go's DelayingInterface embeds Interface and RateLimitingInterface embeds
DelayingInterface, so each layer adds one thing (`AddAfter`, `AddRateLimited`) and passes the
rest through.  Python has no interface embedding: `DelegatingQueue` is that pass-through,
written once for both wrappers.
"""

from __future__ import annotations

from typing import Generic, Protocol

from components.client.workqueue.queue import K


class Queue(Protocol[K]):
    """What every work queue offers a controller (client-go's workqueue.Interface)."""

    def add(self, key: K) -> None: ...

    async def get(self) -> K: ...

    def done(self, key: K) -> None: ...

    def len(self) -> int: ...

    @property
    def depth(self) -> int: ...

    @property
    def adds(self) -> int: ...

    @property
    def retries(self) -> int: ...

    @property
    def shutting_down(self) -> bool: ...

    def shut_down(self, *, drain: bool = True) -> None: ...


class DelegatingQueue(Generic[K]):
    """Passes the work queue's interface through to `self.queue` (set by the subclass)."""

    queue: Queue[K]

    def add(self, key: K) -> None:
        self.queue.add(key)

    async def get(self) -> K:
        return await self.queue.get()

    def done(self, key: K) -> None:
        self.queue.done(key)

    def len(self) -> int:
        return self.queue.len()

    def __len__(self) -> int:
        return self.queue.len()

    @property
    def depth(self) -> int:
        return self.queue.depth

    @property
    def adds(self) -> int:
        return self.queue.adds

    @property
    def retries(self) -> int:
        return self.queue.retries

    @property
    def shutting_down(self) -> bool:
        return self.queue.shutting_down

    def shut_down(self, *, drain: bool = True) -> None:
        self.queue.shut_down(drain=drain)
