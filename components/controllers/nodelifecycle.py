"""The node lifecycle controller: a node whose kubelet stops renewing its Lease (namespace
`kube-node-lease`) is marked Ready=Unknown after the grace period and tainted
`node.kubernetes.io/unreachable:NoExecute`; a node reporting Ready=False is tainted
`node.kubernetes.io/not-ready:NoExecute` (both also NoSchedule); pods on a NoExecute-tainted
node are deleted once their toleration for the taint runs out.  Silence is judged on our own
clock from when we saw the Lease (or the Ready heartbeat) last change, never by comparing
renewTime with our time.  When the Lease renews again, Ready goes back to what the kubelet
last reported (it will post again anyway) and the taints come off."""

from __future__ import annotations

import contextlib
import datetime

from components.client.indexer import NODE_NAME_INDEX
from components.client.informer import EventHandler, InformerFactory
from components.client.listwatch import Resource
from components.client.rest import NotFoundError, RestClient
from components.controllers._infra_nodes import UNKNOWN_REASON, condition, eviction_at, silenced, wanted_taints
from components.controllers.base import Controller, Requeue
from machinery.clock import Clock
from machinery.objects import Obj

NODES = Resource("", "v1", "nodes", namespaced=False, kind="Node")
LEASES = Resource("coordination.k8s.io", "v1", "leases", kind="Lease")
PODS = Resource("", "v1", "pods", kind="Pod")
LEASE_NAMESPACE = "kube-node-lease"
GRACE_PERIOD_S = 40.0  # --node-monitor-grace-period


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NodeLifecycleController(Controller):
    name = "nodelifecycle"
    grace_period = GRACE_PERIOD_S

    def __init__(
        self,
        client: RestClient,
        factory: InformerFactory,
        *,
        clock: Clock | None = None,
        grace_period: float | None = None,
    ) -> None:
        if grace_period is not None:
            self.grace_period = grace_period
        self._probes: dict[str, tuple[object, float]] = {}  # node -> (what we saw, when we saw it change)
        self._kubelet_ready: dict[str, Obj] = {}  # the Ready condition we overwrote with Unknown
        self._taint_seen: dict[tuple[str, str], float] = {}  # (node, taint key) -> first seen
        super().__init__(client, factory, clock=clock)

    def setup(self) -> None:
        self.nodes = self.factory.informer(NODES)
        self.leases = self.factory.informer(LEASES)
        self.pods = self.factory.informer(PODS)
        self.nodes.add_handler(
            EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n), on_delete=self.enqueue)
        )
        self.leases.add_handler(EventHandler(on_add=self._lease, on_update=lambda _o, n: self._lease(n)))
        self.pods.add_handler(EventHandler(on_add=self._pod, on_update=lambda _o, n: self._pod(n)))

    def _lease(self, lease: Obj) -> None:
        meta = lease.get("metadata") or {}
        if meta.get("namespace") == LEASE_NAMESPACE:
            self.queue.add(str(meta.get("name")))

    def _pod(self, pod: Obj) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self.queue.add(str(node))

    async def reconcile(self, key: str) -> None:
        node = self.nodes.indexer.get(key)
        if node is None:
            self._probes.pop(key, None)
            self._kubelet_ready.pop(key, None)
            return
        now = self.clock.now()
        lease = self.leases.indexer.get(f"{LEASE_NAMESPACE}/{key}") or {}
        ready = condition(node)
        probe = ((lease.get("spec") or {}).get("renewTime"), (ready or {}).get("lastHeartbeatTime"))
        seen = self._probes.get(key)
        if seen is None or seen[0] != probe:
            seen = self._probes[key] = (probe, now)
        silent_for = now - seen[1]
        status = node.get("status") or {}
        if silent_for > self.grace_period:
            if ready is None or ready.get("status") != "Unknown":
                if ready is not None:
                    self._kubelet_ready[key] = ready
                body = {**node, "status": {**status, "conditions": silenced(status.get("conditions") or [], _now())}}
                await self.client.replace(NODES.path(name=key, sub="status"), body)
                return  # the update brings us back
        elif ready is not None and ready.get("reason") == UNKNOWN_REASON and key in self._kubelet_ready:
            restored = [
                self._kubelet_ready[key] if c.get("type") == "Ready" else c for c in status.get("conditions") or []
            ]
            await self.client.replace(
                NODES.path(name=key, sub="status"), {**node, "status": {**status, "conditions": restored}}
            )
            del self._kubelet_ready[key]
            return
        spec = node.get("spec") or {}
        taints = wanted_taints(spec.get("taints") or [], (ready or {}).get("status"), _now())
        if taints != (spec.get("taints") or []):
            await self.client.replace(NODES.path(name=key), {**node, "spec": {**spec, "taints": taints}})
            return
        next_look = self.grace_period - silent_for if silent_for <= self.grace_period else None
        evict_next = await self._evict(key, taints, now)
        if evict_next is not None:
            next_look = evict_next if next_look is None else min(next_look, evict_next)
        if next_look is not None:
            raise Requeue(max(0.05, next_look + 0.05))

    async def _evict(self, node: str, taints: list[Obj], now: float) -> float | None:
        """Delete the pods whose time is up; seconds until the next one's, if any."""
        noexec = [t for t in taints if t.get("effect") == "NoExecute"]
        keys = {str(t.get("key")) for t in noexec}
        for gone in [k for k in self._taint_seen if k[0] == node and k[1] not in keys]:
            del self._taint_seen[gone]
        if not noexec:
            return None
        tainted = [(t, self._taint_seen.setdefault((node, str(t.get("key"))), now)) for t in noexec]
        soonest: float | None = None
        for pod in self.pods.indexer.by_index(NODE_NAME_INDEX, node):
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            at = eviction_at(pod, tainted)
            if at is None:
                continue
            if at <= now:
                with contextlib.suppress(NotFoundError):
                    await self.client.delete(PODS.path(meta.get("namespace"), meta.get("name")))
            else:
                soonest = at - now if soonest is None else min(soonest, at - now)
        return soonest
