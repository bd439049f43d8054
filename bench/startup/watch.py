"""The driver's watches: when each pod is first seen Running, and every node Lease renewal.

Times are time.time() on the driver.  Pod start-up latency is kube's SLI: from the pod's
creation (here the moment the driver's create was answered, finer than creationTimestamp's
second) to the driver's watch seeing it Running.  Lease renewals come from a watch on
`kube-node-lease`: each MODIFIED event is one renewal of that node's Lease, and the gaps
between them say whether hollow nodes keep their 10 s rhythm under load.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from components.client.rest import ApiError, RestClient, TransportError

NAMESPACE = "bench-startup"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@dataclass
class PodWatch:
    client: RestClient
    running_at: dict[str, float] = field(default_factory=dict)
    error: str = ""
    _task: asyncio.Task[None] | None = None

    def start(self, resource_version: str) -> None:
        self._task = asyncio.create_task(self._run(resource_version))

    async def _run(self, resource_version: str) -> None:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        params: dict[str, str | int | bool] = {"resourceVersion": resource_version, "timeoutSeconds": 3600}
        try:
            async for event in self.client.watch(path, params):
                pod: dict[str, Any] = event.object
                name = (pod.get("metadata") or {}).get("name")
                if name and name not in self.running_at and (pod.get("status") or {}).get("phase") == "Running":
                    self.running_at[name] = time.time()
            self.error = "the pod watch ended"
        except (ApiError, TransportError) as e:
            self.error = f"the pod watch failed: {e}"

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@dataclass
class LeaseWatch:
    client: RestClient
    prefix: str
    renewals: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    error: str = ""
    _task: asyncio.Task[None] | None = None

    def start(self, resource_version: str) -> None:
        self._task = asyncio.create_task(self._run(resource_version))

    async def _run(self, resource_version: str) -> None:
        try:
            async for event in self.client.watch(LEASES, {"resourceVersion": resource_version, "timeoutSeconds": 3600}):
                name = (event.object.get("metadata") or {}).get("name") or ""
                if name.startswith(self.prefix) and event.type in ("ADDED", "MODIFIED"):
                    self.renewals[name].append(time.time())
            self.error = "the lease watch ended"
        except (ApiError, TransportError) as e:
            self.error = f"the lease watch failed: {e}"

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def gaps(self, start: float, end: float) -> list[float]:
        """Every node's longest wait between renewals over [start, end]: from its last renewal
        before `start` (or `start`), through each renewal in the window, to `end`."""
        out = []
        for times in self.renewals.values():
            before = [t for t in times if t < start]
            inside = [t for t in times if start <= t <= end]
            edges = [before[-1] if before else start, *inside, end]
            out.append(max(b - a for a, b in itertools.pairwise(edges)))
        return out
