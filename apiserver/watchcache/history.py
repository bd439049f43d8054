"""The window of recent events: a ring of at most `capacity` events, oldest evicted first.

`floor` is the oldest revision a reader can start after: every event with a revision above it
is in the window.  Right after a (re)list at revision L it is L (nothing was evicted yet); when
an event is evicted it becomes that event's revision.
"""

from __future__ import annotations

from apiserver.watchcache.events import CacheEvent, Entry


class History:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("the window needs a capacity of at least 1 event")
        self.capacity = capacity
        self._ring: list[CacheEvent | None] = [None] * capacity
        self._start = 0  # absolute index of the oldest event held
        self._end = 0  # absolute index one past the newest
        self.floor = 0

    def __len__(self) -> int:
        return self._end - self._start

    def reset(self, revision: int) -> None:
        """Forget every event: the state was re-listed at `revision`."""
        for i in range(self._start, self._end):
            self._ring[i % self.capacity] = None
        self._start = self._end
        self.floor = revision

    def append(self, event: CacheEvent) -> None:
        if self._end - self._start == self.capacity:
            oldest = self._ring[self._start % self.capacity]
            assert oldest is not None
            self.floor = oldest.revision
            self._start += 1
        self._ring[self._end % self.capacity] = event
        self._end += 1

    def covers(self, revision: int) -> bool:
        """Whether every event after `revision` is still here."""
        return revision >= self.floor

    def since(self, revision: int) -> list[CacheEvent]:
        """The events with a revision above `revision`, oldest first (callers check `covers` first)."""
        lo, hi = self._start, self._end
        while lo < hi:
            mid = (lo + hi) // 2
            ev = self._ring[mid % self.capacity]
            assert ev is not None
            if ev.revision > revision:
                hi = mid
            else:
                lo = mid + 1
        out: list[CacheEvent] = []
        for i in range(lo, self._end):
            ev = self._ring[i % self.capacity]
            assert ev is not None
            out.append(ev)
        return out

    def overlay(self, revision: int) -> dict[str, Entry | None]:
        """For each key changed after `revision`, its state at `revision` (None: it did not exist)."""
        before: dict[str, Entry | None] = {}
        for ev in self.since(revision):
            if ev.entry.key not in before:
                before[ev.entry.key] = ev.prev
        return before
