"""The scheduler's I/O shell: informers feed the cache and the queue; one loop runs the cycles.

A cycle is synchronous (the pure core on the cache's state); what follows it is not: the
binding, victims' deletion, status patches and events run as background tasks, so the next
cycle starts at once.  A pod stays "in flight" in the queue until its binding is answered; a
failed binding forgets the assumption and sends the pod to backoff.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from components.client.events import NORMAL, WARNING, EventRecorder, reference
from components.client.informer import EventHandler, InformerFactory
from components.client.listwatch import Resource
from components.client.rest import ApiError, ConflictError, NotFoundError, RestClient, TransportError, path_of
from components.scheduler.cache import Cache
from components.scheduler.framework import Algorithm, FitError
from components.scheduler.metrics import Metrics
from components.scheduler.nodeinfo import DEFAULT_SCHEDULER, PodInfo, pod_key
from components.scheduler.preemption import disruption_condition, preempt
from components.scheduler.queue import QueuedPod, SchedulingQueue
from machinery.clock import Clock, SystemClock, wait_event
from machinery.objects import Obj

log = logging.getLogger("raftkube.scheduler")
PODS = Resource("", "v1", "pods", True, "Pod")
NODES = Resource("", "v1", "nodes", False, "Node")
NAMESPACES = Resource("", "v1", "namespaces", False, "Namespace")
MAX_BINDINGS_IN_FLIGHT = 256
IDLE_WAIT_S = 1.0
AFFINITY_PLUGINS = {"InterPodAffinity", "PodTopologySpread"}


def responsible(pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    return (spec.get("schedulerName") or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER and not spec.get("nodeName")


def _terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


class Scheduler:
    def __init__(
        self,
        client: RestClient,
        *,
        identity: str = "default-scheduler",
        clock: Clock | None = None,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.client = client
        self.clock: Clock = clock or SystemClock()
        self.cache = Cache()
        self.queue = SchedulingQueue()
        self.algorithm = Algorithm(rng)
        self.metrics = metrics or Metrics()
        self.events = EventRecorder(client, DEFAULT_SCHEDULER, identity)
        self.factory = InformerFactory(client, clock=self.clock)
        # affinity terms' namespaceSelectors read namespaces' labels (kube's namespace lister)
        self.namespaces = self.factory.informer(NAMESPACES)
        self.algorithm.namespace_labels = self._namespace_labels
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._nominated: dict[str, tuple[str, PodInfo]] = {}  # pod key -> (node, pod)

    # -- informer handlers ----------------------------------------------------------------------

    def _namespace_labels(self, name: str) -> Mapping[str, str] | None:
        ns = self.namespaces.indexer.get(name)
        if ns is None:
            return None
        labels = (ns.get("metadata") or {}).get("labels")
        return labels if isinstance(labels, dict) else {}

    def _on_pod_add(self, pod: Obj) -> None:
        now = self.clock.now()
        if (pod.get("spec") or {}).get("nodeName"):
            key = pod_key(pod)
            self.queue.delete(key)
            self._nominated.pop(key, None)
            self.cache.add_pod(pod)
            self.queue.move_all(now, AFFINITY_PLUGINS)
        elif responsible(pod) and not _terminating(pod):
            self._track_nominated(pod)
            self.queue.add(pod, now)
        self._wake.set()

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        now = self.clock.now()
        key = pod_key(new)
        if (new.get("spec") or {}).get("nodeName"):
            self.queue.delete(key)
            self._nominated.pop(key, None)
            self.cache.add_pod(new)
            if not (old.get("spec") or {}).get("nodeName"):
                self.queue.move_all(now, AFFINITY_PLUGINS)
        elif self.cache.is_assumed(key):
            return
        elif responsible(new) and not _terminating(new):
            self._track_nominated(new)
            self.queue.update(old, new, now)
        else:
            self.queue.delete(key)
        self._wake.set()

    def _on_pod_delete(self, pod: Obj) -> None:
        key = pod_key(pod)
        self.queue.delete(key)
        self._nominated.pop(key, None)
        if self.cache.has_pod(key):
            self.cache.remove_pod(key)
            self.queue.move_all(self.clock.now())
        self._wake.set()

    def _on_node_add(self, node: Obj) -> None:
        self.cache.add_node(node)
        self.queue.move_all(self.clock.now())
        self._wake.set()

    def _on_node_update(self, old: Obj, new: Obj) -> None:
        self.cache.update_node(new)
        if (
            old.get("spec") != new.get("spec")
            or (old.get("status") or {}).get("allocatable") != (new.get("status") or {}).get("allocatable")
            or old.get("metadata", {}).get("labels") != new.get("metadata", {}).get("labels")
            or ((old.get("status") or {}).get("conditions") != (new.get("status") or {}).get("conditions"))
        ):
            self.queue.move_all(self.clock.now())
            self._wake.set()

    def _on_node_delete(self, node: Obj) -> None:
        self.cache.remove_node((node.get("metadata") or {}).get("name") or "")

    def _track_nominated(self, pod: Obj) -> None:
        node = (pod.get("status") or {}).get("nominatedNodeName")
        if node:
            self._nominated[pod_key(pod)] = (node, PodInfo.of(pod))
        else:
            self._nominated.pop(pod_key(pod), None)

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Sync the informers, then schedule until cancelled."""
        pods = self.factory.informer(PODS, field_selector="status.phase!=Succeeded,status.phase!=Failed")
        nodes = self.factory.informer(NODES)
        nodes.add_handler(EventHandler(self._on_node_add, self._on_node_update, self._on_node_delete))
        pods.add_handler(EventHandler(self._on_pod_add, self._on_pod_update, self._on_pod_delete))
        self.factory.start()
        try:
            while not await self.factory.wait_for_sync(timeout=5.0):
                log.info("waiting for the pod, node and namespace informers to sync")
            log.info("informers synced: %d nodes", len(self.cache.nodes()))
            await self._loop()
        finally:
            for t in list(self._tasks):
                t.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.events.flush(timeout=2.0)
            await self.factory.stop()

    async def _loop(self) -> None:
        while True:
            now = self.clock.now()
            qp = self.queue.pop(now)
            self._export_pending()
            if qp is None:
                self._wake.clear()
                due = self.queue.next_due()
                wait = IDLE_WAIT_S if due is None else max(0.0, min(IDLE_WAIT_S, due - now))
                await wait_event(self._wake, wait)
                continue
            while len(self._tasks) >= MAX_BINDINGS_IN_FLIGHT:
                await asyncio.wait(list(self._tasks), return_when=asyncio.FIRST_COMPLETED)
            try:
                self.schedule_one(qp)
            except Exception:
                log.exception("scheduling %s failed", qp.key)
                self.metrics.attempts.labels("error", DEFAULT_SCHEDULER).inc()
                self.queue.add_unschedulable(qp, self.clock.now(), set())
            await asyncio.sleep(0)  # let the informers and the bindings run between cycles

    def _export_pending(self) -> None:
        for name, n in self.queue.pending().items():
            self.metrics.pending.labels(name).set(n)

    def schedule_one(self, qp: QueuedPod) -> None:
        pod, key = qp.pod, qp.key
        if self.cache.has_pod(key) or _terminating(pod) or not responsible(pod):
            self.queue.done(key)
            return
        pi = PodInfo.of(pod)
        nominated: dict[str, list[PodInfo]] = {}
        for other_key, (node, other) in self._nominated.items():
            if other_key != key:
                nominated.setdefault(node, []).append(other)
        nodes = self.cache.nodes()
        nominated_node = (pod.get("status") or {}).get("nominatedNodeName") or ""
        try:
            result = self.algorithm.schedule(pi, nodes, nominated, nominated_node)
        except FitError as fit:
            self._unschedulable(qp, pi, fit)
            return
        self.cache.assume(pod, result.node)
        self.metrics.attempts.labels("scheduled", DEFAULT_SCHEDULER).inc()
        self._spawn(self._bind(qp, result.node))

    def _unschedulable(self, qp: QueuedPod, pi: PodInfo, fit: FitError) -> None:
        now = self.clock.now()
        pod = qp.pod
        if fit.num_all_nodes and (pod.get("spec") or {}).get("priority") is not None:
            self.metrics.preemptions.inc()
            candidate, message = preempt(self.algorithm, pi, self.cache.nodes(), fit)
            fit.diagnosis.post_filter_msg = message
            if candidate is not None:
                self.metrics.victims.inc(len(candidate.victims))
                self._nominated[qp.key] = (candidate.node, pi)
                self._spawn(self._preempt(pod, candidate.node, [v.pod for v in candidate.victims]))
        message = fit.message()
        log.info("%s is unschedulable: %s", qp.key, message)
        self.metrics.attempts.labels("unschedulable", DEFAULT_SCHEDULER).inc()
        self.events.record(reference(pod, "v1", "Pod"), WARNING, "FailedScheduling", message, "Scheduling")
        self._spawn(self._set_condition(pod, message))
        self.queue.add_unschedulable(qp, now, fit.unschedulable_plugins() or {"NoNodes"})

    # -- background writes ----------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _bind(self, qp: QueuedPod, node: str) -> None:
        meta = qp.pod.get("metadata") or {}
        ns, name = meta.get("namespace") or "default", meta.get("name") or ""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": meta.get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            await self.client.create(path_of("", "v1", "pods", ns, name, "binding"), body)
        except (ApiError, TransportError) as e:
            self.cache.forget(qp.key)
            if isinstance(e, NotFoundError) or (isinstance(e, ConflictError) and "already assigned" in e.message):
                self.queue.done(qp.key)  # gone, or bound by someone else: the informer will tell
                return
            log.warning("binding %s to %s failed: %s", qp.key, node, e)
            self.metrics.attempts.labels("error", DEFAULT_SCHEDULER).inc()
            self.queue.add_unschedulable(qp, self.clock.now(), set())
            self.queue.move_all(self.clock.now())
            self._wake.set()
            return
        self.queue.done(qp.key)
        self.metrics.e2e.observe(max(0.0, self.clock.now() - qp.timestamp))
        assigned = f"Successfully assigned {ns}/{name} to {node}"
        self.events.record(reference(qp.pod, "v1", "Pod"), NORMAL, "Scheduled", assigned, "Binding")

    async def _preempt(self, pod: Obj, node: str, victims: list[Obj]) -> None:
        meta = pod.get("metadata") or {}
        ns, name = meta.get("namespace") or "default", meta.get("name") or ""
        for v in victims:
            vm = v.get("metadata") or {}
            try:
                cond = disruption_condition(v, pod, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
                if cond is not None:  # strategic: merged into the victim's conditions by type
                    await self.client.patch(
                        path_of("", "v1", "pods", vm.get("namespace"), vm.get("name"), "status"),
                        {"status": {"conditions": [cond]}},
                        "strategic",
                    )
                await self.client.delete(
                    path_of("", "v1", "pods", vm.get("namespace"), vm.get("name")),
                    {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": vm.get("uid")}},
                )
                self.events.record(
                    reference(v, "v1", "Pod"),
                    NORMAL,
                    "Preempted",
                    f"Preempted by pod {meta.get('uid')} on node {node}",
                    "Preempting",
                )
            except NotFoundError:
                pass
            except (ApiError, TransportError) as e:
                log.warning("deleting victim %s/%s failed: %s", vm.get("namespace"), vm.get("name"), e)
        try:
            await self.client.patch(
                path_of("", "v1", "pods", ns, name, "status"), {"status": {"nominatedNodeName": node}}
            )
        except (ApiError, TransportError) as e:
            log.warning("setting nominatedNodeName of %s/%s failed: %s", ns, name, e)

    async def _set_condition(self, pod: Obj, message: str) -> None:
        meta = pod.get("metadata") or {}
        ns, name = meta.get("namespace") or "default", meta.get("name") or ""
        for c in (pod.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message") == message:
                return
        cond = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastProbeTime": None,
        }
        try:
            await self.client.patch(
                path_of("", "v1", "pods", ns, name, "status"),
                {"status": {"conditions": [cond]}},
            )
        except (ApiError, TransportError) as e:
            log.debug("setting PodScheduled of %s/%s failed: %s", ns, name, e)
