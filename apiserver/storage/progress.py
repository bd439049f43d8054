"""Progress requests for a storage's watches: cheap, coalesced, and asked again until answered.

A consistent read needs the watch of an idle prefix to say "every change up to R has been
delivered", R being a revision the reader has just read through the same storage.  The store
(and an etcd with the fix for etcd#15220) answers a progress request only when the watcher has
delivered everything up to the revision it reports: a request that arrives while events are
still queued, or while the watcher catches up, gets no answer at all, and a member that lags
answers with an older revision.  So a request must be asked again until the watch has
*covered* the revision wanted, by a progress notice or by an event.

Each watch has one `ProgressAsker`.  Callers only raise its target (the newest revision the
storage has seen); one task per watch asks, never more than one request at a time, waiting
for an answer with a doubling delay before asking again, and gives up `patience` seconds after
the last caller.  Any number of concurrent callers thus cost one request per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

FIRST_RETRY = 0.05
"""Seconds to wait for an answer before asking again (doubling, up to MAX_RETRY)."""
MAX_RETRY = 0.5
PATIENCE = 10.0
"""Seconds after the last caller's request that a watch still asks (a member cut off from the
others never reaches the target: do not ask it forever)."""


class ProgressAsker:
    """One watch's progress: what it has covered, and the asking towards a target."""

    def __init__(
        self,
        ask: Callable[[], Awaitable[None]],
        covered: int,
        *,
        first_retry: float = FIRST_RETRY,
        max_retry: float = MAX_RETRY,
        patience: float = PATIENCE,
    ) -> None:
        self._ask = ask
        self.covered = covered
        """Every change of the watch up to this revision has been delivered."""
        self.asked = 0
        """Requests sent so far (for metrics and tests)."""
        self._first_retry = first_retry
        self._max_retry = max_retry
        self._patience = patience
        self._target = 0
        self._until = 0.0
        self._reached = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def delivered(self, revision: int) -> bool:
        """The watch delivered everything up to `revision` (a progress notice, or an event of
        that revision); whether that is news."""
        if revision <= self.covered:
            return False
        self.covered = revision
        if revision >= self._target:
            self._reached.set()
        return True

    def want(self, target: int) -> None:
        """Make the watch cover `target` soon: ask, unless it has or a request is under way."""
        if target <= self.covered:
            return
        loop = asyncio.get_running_loop()
        self._target = max(self._target, target)
        self._until = loop.time() + self._patience
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drive())

    async def _drive(self) -> None:
        loop = asyncio.get_running_loop()
        delay = self._first_retry
        while self.covered < self._target and loop.time() < self._until:
            self._reached.clear()
            self.asked += 1
            await self._ask()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reached.wait(), delay)
            delay = min(delay * 2, self._max_retry)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class WatchProgress:
    """A storage's side of progress: the newest revision it has seen and its watches' askers."""

    def __init__(self) -> None:
        self.seen = 0
        """The newest revision any read or write of this storage returned."""
        self._askers: dict[ProgressAsker, None] = {}

    def saw(self, revision: int) -> None:
        self.seen = max(self.seen, revision)

    def open(self, ask: Callable[[], Awaitable[None]], start_revision: int) -> ProgressAsker:
        """The asker of a watch from `start_revision` (whose caller has everything before it)."""
        asker = ProgressAsker(ask, max(start_revision - 1, 0))
        self._askers[asker] = None
        return asker

    async def close(self, asker: ProgressAsker) -> None:
        self._askers.pop(asker, None)
        await asker.close()

    def request(self) -> None:
        """Every open watch is to cover the newest revision seen."""
        for asker in list(self._askers):
            asker.want(self.seen)

    @property
    def watches(self) -> int:
        return len(self._askers)

    @property
    def asked(self) -> int:
        """Requests the open watches have sent (a metric)."""
        return sum(a.asked for a in self._askers)
