"""The delaying queue: a key added with a delay reaches the work queue at its due time.

One heap entry per waiting key: re-adding a waiting key keeps the earlier due time, so a key
re-queued in a hot loop costs no memory.  One background task sleeps on the injected `Clock`
until the earliest due time; an earlier key restarts it (the Clock's sleep is cancellable), and
it ends when nothing is waiting, so an idle queue holds no task.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Generic

from components.client.workqueue.delegating import DelegatingQueue
from components.client.workqueue.queue import K, WorkQueue
from machinery.clock import Clock, SystemClock


class _DueHeap(Generic[K]):
    """A binary min-heap of (due, seq, key) with an index per key, so a due time can move earlier."""

    def __init__(self) -> None:
        self._entries: list[tuple[float, int, K]] = []
        self._index: dict[K, int] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def due_of(self, key: K) -> float | None:
        i = self._index.get(key)
        return None if i is None else self._entries[i][0]

    def first_due(self) -> float | None:
        return self._entries[0][0] if self._entries else None

    def push_or_advance(self, key: K, due: float) -> bool:
        """Schedule `key` at `due`, or at its current due time if that is earlier; True if it changed."""
        i = self._index.get(key)
        if i is None:
            self._entries.append((due, next(self._seq), key))
            self._index[key] = len(self._entries) - 1
            self._sift_up(len(self._entries) - 1)
            return True
        if due >= self._entries[i][0]:
            return False
        self._entries[i] = (due, self._entries[i][1], key)  # keep seq: ties stay in first-add order
        self._sift_up(i)
        return True

    def pop(self) -> tuple[float, K]:
        due, _, key = self._entries[0]
        last = self._entries.pop()
        del self._index[key]
        if self._entries:
            self._entries[0] = last
            self._index[last[2]] = 0
            self._sift_down(0)
        return due, key

    def clear(self) -> None:
        self._entries.clear()
        self._index.clear()

    def _swap(self, i: int, j: int) -> None:
        entries = self._entries
        entries[i], entries[j] = entries[j], entries[i]
        self._index[entries[i][2]] = i
        self._index[entries[j][2]] = j

    def _sift_up(self, i: int) -> None:
        while i > 0:
            parent = (i - 1) // 2
            if self._entries[parent][:2] <= self._entries[i][:2]:
                return
            self._swap(i, parent)
            i = parent

    def _sift_down(self, i: int) -> None:
        n = len(self._entries)
        while True:
            smallest = i
            for child in (2 * i + 1, 2 * i + 2):
                if child < n and self._entries[child][:2] < self._entries[smallest][:2]:
                    smallest = child
            if smallest == i:
                return
            self._swap(i, smallest)
            i = smallest


class DelayingQueue(DelegatingQueue[K]):
    """A `WorkQueue` plus `add_after`; everything else is delegated to the wrapped queue.

    `add_after` must be called from within the running event loop (it may start the timer task).
    """

    def __init__(self, queue: WorkQueue[K] | None = None, *, clock: Clock | None = None) -> None:
        self.queue: WorkQueue[K] = queue if queue is not None else WorkQueue()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._heap: _DueHeap[K] = _DueHeap()
        self._timer: asyncio.Task[None] | None = None

    def add_after(self, key: K, seconds: float) -> None:
        """Add `key` once `seconds` have passed; a non-positive delay adds it now.

        A key already waiting keeps the earlier of its two due times. An immediate add does not
        cancel a waiting entry for the same key: that one still fires at its due time.
        """
        if self.queue.shutting_down:
            return
        if seconds <= 0:
            self.queue.add(key)
            return
        due = self.clock.now() + seconds
        first = self._heap.first_due()
        if not self._heap.push_or_advance(key, due):
            return
        if self._timer is None or self._timer.done() or first is None or due < first:
            self._restart_timer()

    @property
    def waiting(self) -> int:
        """Keys waiting for their due time (one heap entry each)."""
        return len(self._heap)

    def due_of(self, key: K) -> float | None:
        """When a waiting `key` reaches the queue, on the clock's scale; None if it is not waiting."""
        return self._heap.due_of(key)

    def shut_down(self, *, drain: bool = True) -> None:
        """Shut the work queue down (see `WorkQueue.shut_down`); keys still waiting are dropped."""
        self.queue.shut_down(drain=drain)
        self._heap.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _restart_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().create_task(self._run_timer())

    async def _run_timer(self) -> None:
        """Move due keys to the work queue, sleeping until the next due time; end when none wait."""
        while (first := self._heap.first_due()) is not None:
            now = self.clock.now()
            if first > now:
                await self.clock.sleep(first - now)
                continue
            while (due := self._heap.first_due()) is not None and due <= now:
                self.queue.add(self._heap.pop()[1])
