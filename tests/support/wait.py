"""Waiting in tests: poll a check until it gives something truthy, bounded in time, and fail
saying what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(what: str, check: Callable[[], Any], wait: float = 15.0, step: float = 0.05) -> Any:
    """What `check` gave once truthy; AssertionError naming `what` after `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {wait:.0f} s: {what}"
        time.sleep(step)
