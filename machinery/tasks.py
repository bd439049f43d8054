"""Running coroutines side by side until the first one ends.

A stream relayed both ways (a WebSocket to the kubelet and back, a log to a client that may
hang up) is over when either direction ends; the other must then be cancelled and awaited, or
its task outlives the request and its exception is reported as never retrieved.  That dance is
written once here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


async def until_first_ends(*coroutines: Coroutine[Any, Any, Any]) -> None:
    """Run `coroutines` as tasks; when one ends (returns, raises or is cancelled), cancel the
    others and wait for all of them.  Their results and exceptions are dropped: each relay
    reports its own failures.  Cancelling the caller cancels every task too."""
    tasks = [asyncio.create_task(c) for c in coroutines]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
