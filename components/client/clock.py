"""The components' notion of time, injected so that back-offs, leases and resyncs are testable."""

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
