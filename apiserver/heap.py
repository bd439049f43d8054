"""Keeping the watch caches out of the cyclic garbage collector's sight.

An apiserver holds every object of every cached resource as decoded JSON: millions of
long-lived dicts and lists.  CPython's full collection walks all of them each time the
long-lived generation grows by a quarter, which under a create load was a quarter of the
apiserver's CPU and ~300 ms pauses (measured with gc.callbacks during
`raftkube bench apiserver --only gates`).  Objects that survived a full collection are
frozen (gc.freeze) right after it, so the next full collection walks only what is new.

Frozen objects are never scanned, so a garbage cycle among them would stay until the next
thaw; every `thaw_every` seconds everything is unfrozen and the following full collection
sees it all once.  Cached objects are plain JSON trees (no cycles) and die by reference
counting, so little waits for a thaw.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

THAW_EVERY_S = 600.0
CHECK_EVERY_S = 0.5


class HeapKeeper:
    """Freezes the heap after every full collection; thaws it every `thaw_every` seconds."""

    def __init__(self, thaw_every: float = THAW_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.thaw_every = thaw_every
        self._clock = clock
        self._full_collection_done = False
        self._last_thaw = clock()
        self.freezes = 0
        self.thaws = 0

    def on_collection(self, phase: str, info: dict[str, Any]) -> None:
        """A gc.callbacks hook: notes a finished full collection (freezing inside one is unsafe)."""
        if phase == "stop" and info.get("generation") == 2:
            self._full_collection_done = True

    def tick(self) -> None:
        """Freeze what survived the last full collection, or thaw when it is time."""
        now = self._clock()
        if now - self._last_thaw >= self.thaw_every:
            self._last_thaw = now
            self._full_collection_done = False
            gc.unfreeze()
            self.thaws += 1
        elif self._full_collection_done:
            self._full_collection_done = False
            gc.freeze()
            self.freezes += 1

    async def run(self, every: float = CHECK_EVERY_S) -> None:
        """Until cancelled; installs its hook, and removes it (thawing everything) after.

        The young generation keeps CPython's threshold: a larger one (20,000) measured no
        better on creates and made the webhook's p50 noisier (`bench apiserver --only gates`)."""
        gc.callbacks.append(self.on_collection)
        try:
            while True:
                await asyncio.sleep(every)
                self.tick()
        finally:
            gc.callbacks.remove(self.on_collection)
            gc.unfreeze()
