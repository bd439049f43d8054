"""The driver's view of the binds: a watch on the pods that stamps when each gets spec.nodeName.

A watch (rather than polling a LIST) gives every pod its own bind time, which the scheduler's
throughput over time and the per-pod latencies come from.  Times are time.time() (wall clock)
so that they compare with the timestamps of the scheduler's log lines.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import orjson

from bench.apiserver.http11 import Connection, HTTPError, Target
from bench.scheduler.cluster import NAMESPACE


@dataclass
class BindWatch:
    """Pod name -> when the driver saw it bound; `nodes` counts pods per node."""

    target: Target
    resource_version: str
    expected: int
    bound_at: dict[str, float] = field(default_factory=dict)
    nodes: Counter[str] = field(default_factory=Counter)
    error: str = ""
    all_bound: asyncio.Event = field(default_factory=asyncio.Event)
    _conn: Connection | None = None
    _task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Open the watch (its response head read) before the scheduler starts, so no bind is missed."""
        self._conn = Connection(self.target, self.target.ssl_context())
        path = (
            f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&resourceVersion={self.resource_version}"
            "&allowWatchBookmarks=false&timeoutSeconds=3600"
        )
        await self._conn.open_stream(path)
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._conn is not None
        try:
            async for line in self._conn.lines():
                now = time.time()
                if b'"nodeName"' not in line:
                    continue
                event = orjson.loads(line)
                pod = event.get("object") or {}
                node = (pod.get("spec") or {}).get("nodeName")
                name = (pod.get("metadata") or {}).get("name")
                if node and name and name not in self.bound_at and event.get("type") in ("ADDED", "MODIFIED"):
                    self.bound_at[name] = now
                    self.nodes[node] += 1
                    if len(self.bound_at) >= self.expected:
                        self.all_bound.set()
            self.error = "the watch ended"
        except (OSError, HTTPError, asyncio.IncompleteReadError, ValueError) as e:
            self.error = f"the watch failed: {type(e).__name__}: {e}"
        self.all_bound.set()  # wake the waiter; it checks the count

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})  # raises neither its error nor its cancellation, only ours
        if self._conn is not None:
            await self._conn.close()
