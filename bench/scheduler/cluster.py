"""The cluster the scheduler finds: Ready Node objects (no kubelets) and pending pods.

Everything is created through the apiserver over HTTPS as admin, many requests in flight
(bench.apiserver.http11, one keep-alive connection per worker), before the scheduler starts,
so that its start finds the whole backlog and the measured window holds scheduling only.
A node takes three requests, as a kubelet's registration and the node lifecycle controller
would make them: the create, its status (Ready, allocatable), then a spec without the
`node.kubernetes.io/not-ready` taint that admission puts on every new node.  Every request
is an update with a whole object (http11 sends application/json only, not merge patches).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson

from bench.apiserver.backends import BackendError
from bench.apiserver.http11 import Connection, HTTPError, Response, Target
from machinery.objects import Obj

NAMESPACE = "bench-sched"
NODE_PREFIX = "sched-node"
POD_PREFIX = "sched-pod"
POD_CPU = "10m"
POD_MEMORY = "16Mi"
WORKERS = 32
"""Requests in flight while the cluster is built (the apiserver has one worker process)."""


@dataclass(frozen=True)
class NodeSize:
    """What each node offers: enough that every pod fits with room to spare, so that no
    pod is ever unschedulable and the run measures binding, not the unschedulable pool."""

    cpu_millis: int
    memory_mib: int
    pods: int

    @staticmethod
    def for_case(pods: int, nodes: int) -> NodeSize:
        per_node = max(110, 2 * math.ceil(pods / nodes) + 10)
        return NodeSize(cpu_millis=max(32_000, per_node * 20), memory_mib=max(131_072, per_node * 32), pods=per_node)

    def resources(self) -> dict[str, str]:
        return {"cpu": f"{self.cpu_millis}m", "memory": f"{self.memory_mib}Mi", "pods": str(self.pods)}


def node_name(i: int) -> str:
    return f"{NODE_PREFIX}-{i}"


def pod_name(i: int) -> str:
    return f"{POD_PREFIX}-{i}"


def node_object(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "bench": "scheduler"}},
        "spec": {},
    }


def node_status(size: NodeSize) -> Obj:
    return {
        "capacity": size.resources(),
        "allocatable": size.resources(),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "benchmark node"}],
    }


def pod_object(name: str) -> Obj:
    requests = {"cpu": POD_CPU, "memory": POD_MEMORY}
    container = {"name": "c", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": requests}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "bench-sched"}},
        "spec": {"containers": [container]},
    }


def _ok(r: Response, what: str) -> Obj:
    if r.status >= 300:
        raise BackendError(f"{what}: HTTP {r.status} {r.body[:300]!r}")
    doc: Obj = orjson.loads(r.body)
    return doc


class Builder:
    """Creates the namespace, the nodes and the pods; `on_progress(done, total)` after each."""

    def __init__(self, target: Target, on_progress: Callable[[str, int, int], None] | None = None) -> None:
        self.target = target
        self.on_progress = on_progress or (lambda what, done, total: None)

    async def _pool(self, what: str, total: int, one: Callable[[Connection, int], Awaitable[None]]) -> None:
        """Run `one(conn, i)` for i in range(total), WORKERS at a time, each worker on its own connection."""
        todo = iter(range(total))
        done = 0
        ctx = self.target.ssl_context()

        async def worker() -> None:
            nonlocal done
            conn = Connection(self.target, ctx)
            try:
                for i in todo:
                    try:
                        await one(conn, i)
                    except (OSError, HTTPError):  # one retry on a fresh connection
                        await conn.close()
                        await one(conn, i)
                    done += 1
                    if done % 100 == 0 or done == total:
                        self.on_progress(what, done, total)
            finally:
                await conn.close()

        tasks = [asyncio.create_task(worker()) for _ in range(min(WORKERS, total))]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.wait(tasks)  # every worker's connection closed; a cancellation of ours goes on

    async def namespace(self) -> None:
        conn = Connection(self.target, self.target.ssl_context())
        try:
            body = orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            r = await conn.request("POST", "/api/v1/namespaces", body)
            if r.status not in (201, 409):
                raise BackendError(f"creating namespace {NAMESPACE}: HTTP {r.status} {r.body[:200]!r}")
        finally:
            await conn.close()

    async def nodes(self, count: int, size: NodeSize) -> None:
        status = node_status(size)

        async def one(conn: Connection, i: int) -> None:
            name = node_name(i)
            r = await conn.request("POST", "/api/v1/nodes", orjson.dumps(node_object(name)))
            if r.status == 409:  # created by a first try whose answer was lost
                r = await conn.request("GET", f"/api/v1/nodes/{name}")
            node = _ok(r, f"creating node {name}")
            node["status"] = status
            node = _ok(
                await conn.request("PUT", f"/api/v1/nodes/{name}/status", orjson.dumps(node)), f"status of {name}"
            )
            if node.get("spec", {}).get("taints"):
                # the node lifecycle controller (not running) would lift the not-ready taint
                node["spec"].pop("taints")
                _ok(await conn.request("PUT", f"/api/v1/nodes/{name}", orjson.dumps(node)), f"untainting {name}")

        await self._pool("nodes", count, one)

    async def pods(self, count: int) -> None:
        async def one(conn: Connection, i: int) -> None:
            name = pod_name(i)
            r = await conn.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", orjson.dumps(pod_object(name)))
            if r.status != 409:
                _ok(r, f"creating pod {name}")

        await self._pool("pods", count, one)


async def request(target: Target, method: str, path: str) -> Obj:
    """One GET-like request on a connection of its own; the decoded answer."""
    conn = Connection(target, target.ssl_context())
    try:
        return _ok(await conn.request(method, path), f"{method} {path}")
    finally:
        await conn.close()


async def resource_version(target: Target) -> str:
    """The store's revision now (a consistent LIST of one pod), where the bind watch starts."""
    doc = await request(target, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1")
    return str(doc["metadata"]["resourceVersion"])


async def unbound(target: Target) -> int:
    """Pods of the namespace without spec.nodeName, by the apiserver's own count (a LIST)."""
    doc = await request(target, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods?fieldSelector=spec.nodeName%3D")
    return len(doc.get("items") or [])
