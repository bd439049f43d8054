"""The member's clock, injected: lease expiry, request deadlines and the apply log read the
time only through it, so that member logic can be driven by a test's hand-set clock."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (only differences mean anything)."""
        ...


class SystemClock:
    """The process's monotonic clock."""

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to: for tests."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a monotonic clock cannot go back")
        self.now += seconds


SYSTEM_CLOCK = SystemClock()
