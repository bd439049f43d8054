"""Time as an injected dependency, so back-offs, leases, resyncs and the watch cache's bookmarks and
freshness waits are testable; the apiserver and the components share it (a fake clock drives both)."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return after `seconds` on this clock; must be cancellable."""
        ...


class SystemClock:
    """The real clock: monotonic time and asyncio's sleep."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Whether `event` was set within `timeout` seconds.  Unlike Python 3.11's `wait_for`, a
    cancellation that arrives just as the event is set is never swallowed: a loop that waits
    here stops when its task is cancelled (a kubelet once ignored a cancel this way)."""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True
