"""Waiting in tests: poll a check until it gives something truthy, bounded in time, and fail
saying what was awaited.  `until` for a plain check, `eventually` inside a coroutine (its check
may be a coroutine function)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
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


async def eventually(
    check: Callable[[], Awaitable[Any] | Any], what: str = "the check", *, timeout: float = 30.0, step: float = 0.05
) -> Any:
    """What `check` gave (awaited when it is a coroutine) once truthy; AssertionError naming
    `what` after `timeout` seconds.  The loop keeps running between polls."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        await asyncio.sleep(step)
