"""Helpers of the tests that run a kubelet in their own event loop: ending it, leaving no
container behind, and reading an object that may be gone."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from components.client.rest import NotFoundError, RestClient
from components.kubelet.process_runtime import ProcessRuntime


async def stop_kubelet(task: asyncio.Task[object], runtime: ProcessRuntime) -> None:
    """Cancel the kubelet's task and kill, by pid, every container it left running."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    for uid in runtime.running_pods():
        for c in (runtime.root / "containers" / uid).iterdir():
            runtime.stop(uid, c.name, 0.0, time.time())


async def get_or_none(client: RestClient, path: str) -> Any:
    """The object at `path`, or None once it is gone."""
    with contextlib.suppress(NotFoundError):
        return await client.get(path)
    return None
