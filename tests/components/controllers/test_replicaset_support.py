"""Helpers for the workload controllers' tests: bounded waits and a stand-in kubelet.

There is no scheduler or kubelet in these tests.  `FakeKubelet` plays the kubelet's one part
that matters here: every pod of its namespace is marked Running and Ready (status
subresource) once it has existed `delay` seconds.  Pods are left unscheduled (no
`spec.nodeName`), so a delete removes them at once, as kube does for unscheduled pods."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from components.client import kubeconfig
from components.client.rest import ApiError, RestClient
from tests.apiserver.support import ApiserverUnderTest

WAIT_S = 30.0


@contextlib.asynccontextmanager
async def api(cluster: ApiserverUnderTest) -> AsyncIterator[RestClient]:
    """The admin's client (its close waits for every TLS connection to end)."""
    async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
        yield client


def rfc3339_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def pods_of(client: RestClient, ns: str, selector: str = "") -> list[dict[str, Any]]:
    params = {"labelSelector": selector} if selector else None
    return list((await client.get(f"/api/v1/namespaces/{ns}/pods", params)).get("items") or [])


async def make_namespace(client: RestClient, ns: str) -> None:
    await client.create("/api/v1/namespaces", {"metadata": {"name": ns}})


def ready_status() -> dict[str, Any]:
    now = rfc3339_now()
    return {
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            ],
        }
    }


def is_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


class FakeKubelet:
    """Marks every pod of `ns` Running+Ready `delay` seconds after it was first seen."""

    def __init__(self, client: RestClient, ns: str, delay: float = 0.0) -> None:
        self.client, self.ns, self.delay = client, ns, delay
        self.seen: dict[str, float] = {}
        self.paused = False

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.paused:
                for pod in await pods_pending(self.client, self.ns):
                    name = pod["metadata"]["name"]
                    first = self.seen.setdefault(name, loop.time())
                    if loop.time() - first >= self.delay:
                        with contextlib.suppress(ApiError):
                            await self.client.patch(
                                f"/api/v1/namespaces/{self.ns}/pods/{name}/status", ready_status(), patch_type="merge"
                            )
            await asyncio.sleep(0.05)


async def pods_pending(client: RestClient, ns: str) -> list[dict[str, Any]]:
    return [p for p in await pods_of(client, ns) if not is_ready(p) and not p["metadata"].get("deletionTimestamp")]


@contextlib.asynccontextmanager
async def kubelet(client: RestClient, ns: str, delay: float = 0.0) -> AsyncIterator[FakeKubelet]:
    k = FakeKubelet(client, ns, delay)
    task = asyncio.create_task(k.run(), name=f"fake kubelet {ns}")
    try:
        yield k
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
