"""Ending a kubelet a test ran in its own event loop, leaving no container behind."""

from __future__ import annotations

import asyncio
import contextlib
import time

from components.kubelet.process_runtime import ProcessRuntime


async def stop_kubelet(task: asyncio.Task[object], runtime: ProcessRuntime) -> None:
    """Cancel the kubelet's task and kill, by pid, every container it left running."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    for uid in runtime.running_pods():
        for c in (runtime.root / "containers" / uid).iterdir():
            runtime.stop(uid, c.name, 0.0, time.time())
