"""Keeping the watch caches out of the cyclic garbage collector's sight.

An apiserver holds every object of every cached resource as decoded JSON: millions of
long-lived dicts and lists, and a create load adds a pod's worth of them each time.
CPython's generational collector scans a surviving container in every generation it passes
through: in the young one, again in the middle one (whose collections scan everything ten
young ones promoted), and in each full collection until something freezes it.  Yet almost
nothing here is cyclic garbage: cached objects are plain JSON trees that die by reference
counting, and a request, served or refused, leaves no cycle behind.  Measured (CPU time in
collections, by gc.callbacks) in the apiserver of `raftkube bench apiserver --only creates
--seconds 20` on an AMD EPYC with 2 cores: 117 us of every create, a ninth of its CPU, while
the middle and full collections freed 753 objects in the whole run.

So the keeper collects only the young generation automatically, and on every tick
(`FREEZE_EVERY_S`) collects it once more, so that what died young goes, then freezes
whatever is alive (gc.freeze splices the generations' lists onto the permanent one: constant
time, 0.9 us).  A container is then scanned once, young, and never again until a thaw, which
unfreezes everything and collects in full every `thaw_every` seconds.  The same benchmark:
41 us of collections a create.  A full collection of 30,000 cached pods' 880,000 containers
takes 0.4 s there, as the one after the old keeper's thaw did.

A cycle that became garbage after it was frozen is kept until the next thaw.  Requests,
served or refused, make none; connections did: Python 3.11's socket transport is a cycle
through its own read callback (CPython gh-100348), about 1 KB a closed connection, which
apiserver.transport_cycle mends.  (A thaw whenever the frozen heap grew by half would bound
such garbage without knowing its source, but scans a growing cache three times over: 85 us
a create.)
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

FREEZE_EVERY_S = 0.1
THAW_EVERY_S = 600.0
NEVER = 2**30  # a generation threshold no count reaches: only explicit collections
"""The middle and oldest generations' thresholds while a keeper runs."""


class HeapKeeper:
    """A young collection and a freeze on every tick; a thaw and a full collection every
    `thaw_every` seconds."""

    def __init__(self, thaw_every: float = THAW_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.thaw_every = thaw_every
        self._clock = clock
        self._last_thaw = clock()
        self.freezes = 0
        self.thaws = 0

    def tick(self) -> None:
        """Freeze everything alive after a young collection, or, when it is time, after
        thawing it all and collecting in full."""
        now = self._clock()
        if now - self._last_thaw >= self.thaw_every:
            self._last_thaw = now
            gc.unfreeze()
            gc.collect()  # the one full scan a thaw period: cycles that died frozen are freed
            self.thaws += 1
        else:
            gc.collect(0)  # what died since the last young collection goes before the freeze
        gc.freeze()
        self.freezes += 1

    async def run(self, every: float = FREEZE_EVERY_S) -> None:
        """Until cancelled: young collections only, a tick every `every` seconds; on the way out
        CPython's thresholds come back and everything is thawed.

        The young generation keeps CPython's threshold (700): objects that die before it is
        reached are never scanned, and a larger one (20,000) measured no better on creates."""
        thresholds = gc.get_threshold()
        gc.set_threshold(thresholds[0], NEVER, NEVER)
        try:
            while True:
                await asyncio.sleep(every)
                self.tick()
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
