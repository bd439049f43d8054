"""The daemonset controller: one pod of each DaemonSet's template on every node that should run it.

Keys are `namespace/name` of DaemonSets.  A reconcile, as kube's syncDaemonSet:

1. history: the ControllerRevision of the current template is found (or made, numbered
   after the newest; an old template come back gets its old revision renumbered), and its
   hash is the `controller-revision-hash` label of the pods made from now on;
2. placement: the DaemonSet's pods (claimed by selector, as a ReplicaSet claims) are grouped
   by node; a node that should run the pod and has none gets one, a node with more than one
   keeps the oldest, a failed pod is deleted (and so replaced), a node that should no longer
   run it loses it (`_daemon_nodes`);
3. rolling update (`updateStrategy: RollingUpdate`): without `maxSurge`, pods of an older
   template are deleted, the unavailable ones at once and the available ones while fewer than
   `maxUnavailable` nodes are unavailable; placement then puts the new template's pod there.
   With `maxSurge`, a node gets the new pod beside its old one (at once where the old one is
   unavailable, else while fewer than `maxSurge` nodes are waiting for theirs), and the old
   pod goes when the new one is available; placement keeps one pod of each template a node
   meanwhile.  `OnDelete` replaces a pod only when someone deletes it.
4. history older than `revisionHistoryLimit` that no pod uses is deleted;
5. status: desired/current/misscheduled/ready/available/unavailable/updated counts.

Creations and deletions are expectations first (`_workload_expectations`), as for ReplicaSets,
and each is told in an event (SuccessfulCreate, SuccessfulDelete, FailedDaemonPod, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Callable
from typing import Any

from components.client.events import NORMAL, WARNING, ObjectRef, reference
from components.client.indexer import NAMESPACE_INDEX, key_of
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import ApiError, ForbiddenError, NotFoundError
from components.controllers import _history as history
from components.controllers._claim import claim_pods
from components.controllers._daemon_nodes import node_of, placement, pod_spec_for
from components.controllers._workload_expectations import Expectations
from components.controllers._workload_pods import available_in, is_available, owner_ref, selector_matches
from components.controllers._workload_rollout import scaled_value
from components.controllers.base import Controller, Requeue
from machinery.objects import Obj, controller_ref, labels, metadata, spec, status
from machinery.pods import is_ready
from machinery.timestamps import parse_time

DAEMON_SETS = Resource("apps", "v1", "daemonsets", kind="DaemonSet")
PODS = Resource("", "v1", "pods", kind="Pod")
NODES = Resource("", "v1", "nodes", kind="Node")
REVISIONS = history.REVISIONS
BURST = 250  # creations per reconcile at most (kube's burstReplicas)


def _created(obj: Obj) -> float:
    return parse_time(metadata(obj).get("creationTimestamp")) or 0.0


def _not_deleting(pod: Obj) -> bool:
    return not metadata(pod).get("deletionTimestamp")


class DaemonSetController(Controller):
    name = "daemonset"
    workers = 2
    wall: Callable[[], float] = staticmethod(time.time)

    def setup(self) -> None:
        self.expectations = Expectations(self.clock.now)
        self.daemonsets = self.factory.informer(DAEMON_SETS)
        self.pods = self.factory.informer(PODS)
        self.nodes = self.factory.informer(NODES)
        self.revisions = self.factory.informer(REVISIONS)
        self.daemonsets.add_handler(
            EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n), on_delete=self._ds_deleted)
        )
        self.pods.add_handler(
            EventHandler(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)
        )
        every = EventHandler(
            on_add=lambda _n: self._all(), on_update=self._node_updated, on_delete=lambda _n: self._all()
        )
        self.nodes.add_handler(every)
        self.revisions.add_handler(
            EventHandler(on_add=self._owned, on_update=lambda _o, n: self._owned(n), on_delete=self._owned)
        )

    # -- events -------------------------------------------------------------------------------

    def _all(self) -> None:
        for ds in self.daemonsets.indexer.objects():
            self.enqueue(ds)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        if labels(old) != labels(new) or spec(old).get("taints") != spec(new).get("taints"):
            self._all()

    def _ds_deleted(self, ds: Obj) -> None:
        self.expectations.forget(key_of(ds))

    def _owner_key(self, obj: Obj) -> str | None:
        ref = controller_ref(obj)
        if ref is None or ref.get("kind") != "DaemonSet":
            return None
        key = f"{metadata(obj).get('namespace')}/{ref.get('name')}"
        ds = self.daemonsets.indexer.get(key)
        return key if ds is not None and metadata(ds).get("uid") == ref.get("uid") else None

    def _owned(self, obj: Obj) -> None:
        key = self._owner_key(obj)
        if key is not None:
            self.queue.add(key)

    def _orphan(self, pod: Obj) -> None:
        ns = metadata(pod).get("namespace") or ""
        for ds in self.daemonsets.indexer.by_index(NAMESPACE_INDEX, ns):
            if selector_matches(spec(ds).get("selector"), labels(pod)):
                self.enqueue(ds)

    def _pod_added(self, pod: Obj) -> None:
        key = self._owner_key(pod)
        if key is None:
            if controller_ref(pod) is None:
                self._orphan(pod)
            return
        self.expectations.creation_observed(key)
        self.queue.add(key)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if metadata(new).get("deletionTimestamp") and not metadata(old).get("deletionTimestamp"):
            self._pod_deleted(new)
            return
        key = self._owner_key(new)
        if key is not None:
            self.queue.add(key)
        elif controller_ref(new) is None and labels(old) != labels(new):
            self._orphan(new)
        old_key = self._owner_key(old)
        if old_key is not None and old_key != key:
            self.queue.add(old_key)

    def _pod_deleted(self, pod: Obj) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.deletion_observed(key, key_of(pod))
            self.queue.add(key)

    # -- reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        ds = self.daemonsets.indexer.get(key)
        if ds is None:
            self.expectations.forget(key)
            return
        if metadata(ds).get("deletionTimestamp"):
            return
        revisions = self._revisions(ds)
        current = await history.sync_revision(self.client, ds, DAEMON_SETS, revisions)
        hashed = (metadata(current).get("labels") or {}).get(history.REVISION_HASH_LABEL) or history.current_hash(ds)
        pods = await claim_pods(
            self.client,
            ds,
            spec(ds).get("selector") or {},
            self.pods.indexer.by_index(NAMESPACE_INDEX, metadata(ds).get("namespace") or ""),
            owner_ref(ds, "DaemonSet", "apps/v1"),
            lambda _p: True,
        )
        by_node: dict[str, list[Obj]] = {}
        for pod in pods:
            by_node.setdefault(node_of(pod), []).append(pod)
        # whether each node should run the pod (and keep one it has), worked out once a pass
        placed = {str(metadata(n).get("name") or ""): placement(ds, n) for n in self.nodes.indexer.objects()}
        error: Exception | None = None
        if self.expectations.satisfied(key):
            error = await self._manage(key, ds, placed, by_node, hashed)
            if error is None and self._rolling(ds):
                error = await self._roll(key, ds, placed, by_node, hashed)
        await self._prune_history(ds, revisions, current, pods)
        await self._write_status(ds, placed, by_node, hashed)
        if error is not None:
            raise error
        min_ready = int(spec(ds).get("minReadySeconds") or 0)
        now = self.wall()
        waits = [w for w in (available_in(p, min_ready, now) for p in pods) if w is not None]
        if waits:
            raise Requeue(after=min(waits) + 0.05)

    # -- history ------------------------------------------------------------------------------

    def _revisions(self, ds: Obj) -> list[Obj]:
        uid = metadata(ds).get("uid")
        ns = metadata(ds).get("namespace") or ""
        return [
            r
            for r in self.revisions.indexer.by_index(NAMESPACE_INDEX, ns)
            if (controller_ref(r) or {}).get("uid") == uid
        ]

    async def _prune_history(self, ds: Obj, revisions: list[Obj], current: Obj, pods: list[Obj]) -> None:
        limit = spec(ds).get("revisionHistoryLimit")
        limit = limit if isinstance(limit, int) else 10
        in_use = {labels(p).get(history.REVISION_HASH_LABEL) for p in pods if _not_deleting(p)}
        names = {metadata(current).get("name") or ""}
        for revision in history.to_prune(revisions, {h for h in in_use if h}, next(iter(names)), limit):
            m = metadata(revision)
            with contextlib.suppress(NotFoundError):
                await self.client.delete(REVISIONS.path(m.get("namespace"), m.get("name")))

    # -- placement ----------------------------------------------------------------------------

    async def _manage(
        self, key: str, ds: Obj, placed: dict[str, tuple[bool, bool]], by_node: dict[str, list[Obj]], hashed: str
    ) -> Exception | None:
        create: list[str] = []
        delete: list[Obj] = []
        surging = self._rolling(ds) and self._counts(ds, sum(run for run, _ in placed.values()))[0] > 0
        for name, (should_run, keep) in placed.items():
            here = [p for p in by_node.get(name, ()) if _not_deleting(p)]
            if should_run:
                failed = [p for p in here if status(p).get("phase") == "Failed"]
                for pod in failed:
                    self.events.record(
                        self._ref(ds),
                        WARNING,
                        "FailedDaemonPod",
                        f"Found failed daemon pod {metadata(pod).get('namespace')}/{metadata(pod).get('name')}"
                        f" on node {name}, will try to kill it",
                    )
                delete += failed
                running = [p for p in here if p not in failed]
                if not running and not failed:
                    create.append(name)
                elif len(running) > 1:
                    running.sort(key=_created)
                    if surging:  # the oldest of each template stays: a surge pod beside the old one
                        new = [p for p in running if labels(p).get(history.REVISION_HASH_LABEL) == hashed]
                        old = [p for p in running if p not in new]
                        delete += new[1:] + old[1:]
                    else:
                        delete += running[1:]  # one daemon pod a node: the oldest stays
            elif not keep:
                delete += here
        create = create[:BURST]
        self.expectations.expect(key, len(create), [key_of(p) for p in delete])
        results = await asyncio.gather(
            *(self._create_pod(key, ds, n, hashed) for n in create),
            *(self._delete_pod(key, ds, p) for p in delete),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, Exception)]
        return errors[0] if errors else None

    async def _create_pod(self, key: str, ds: Obj, node_name: str, hashed: str) -> None:
        template = spec(ds).get("template") or {}
        tmeta = template.get("metadata") or {}
        body_meta: Obj = {
            "generateName": f"{metadata(ds).get('name')}-",
            "labels": {**(tmeta.get("labels") or {}), history.REVISION_HASH_LABEL: hashed},
            "ownerReferences": [owner_ref(ds, "DaemonSet", "apps/v1")],
        }
        for field in ("annotations", "finalizers"):
            if tmeta.get(field):
                body_meta[field] = copy.deepcopy(tmeta[field])
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": body_meta, "spec": pod_spec_for(ds, node_name)}
        try:
            created = await self.client.create(PODS.path(metadata(ds).get("namespace")), body)
        except ApiError as e:
            self.expectations.creation_observed(key)  # it will not be observed
            if isinstance(e, ForbiddenError) and "being terminated" in e.message:
                return
            self.events.record(self._ref(ds), WARNING, "FailedCreate", f"Error creating: {e.message}")
            raise
        self.events.record(self._ref(ds), NORMAL, "SuccessfulCreate", f"Created pod: {metadata(created).get('name')}")

    async def _delete_pod(self, key: str, ds: Obj, pod: Obj) -> None:
        m = metadata(pod)
        try:
            await self.client.delete(
                PODS.path(m.get("namespace"), m.get("name")), {"preconditions": {"uid": m.get("uid")}}
            )
        except ApiError as e:
            self.expectations.deletion_observed(key, key_of(pod))
            if not isinstance(e, NotFoundError):
                self.events.record(self._ref(ds), WARNING, "FailedDelete", f"Error deleting: {e.message}")
                raise
            return
        self.events.record(self._ref(ds), NORMAL, "SuccessfulDelete", f"Deleted pod: {m.get('name')}")

    def _ref(self, ds: Obj) -> ObjectRef:
        return reference(ds, "apps/v1", "DaemonSet")

    # -- rolling update -----------------------------------------------------------------------

    @staticmethod
    def _rolling(ds: Obj) -> bool:
        return ((spec(ds).get("updateStrategy") or {}).get("type") or "RollingUpdate") == "RollingUpdate"

    @staticmethod
    def _counts(ds: Obj, desired: int) -> tuple[int, int]:
        """(maxSurge, maxUnavailable) scaled to the `desired` nodes (kube's SurgeCount and
        UnavailableCount); both 0, which validation refuses, is read as 1 unavailable, as kube does."""
        rolling = (spec(ds).get("updateStrategy") or {}).get("rollingUpdate") or {}
        surge = scaled_value(rolling.get("maxSurge", 0), desired, True)
        unavailable = scaled_value(rolling.get("maxUnavailable", 1), desired, True)
        if desired > 0 and surge == 0 and unavailable == 0:
            unavailable = 1
        return surge, unavailable

    async def _roll(
        self, key: str, ds: Obj, placed: dict[str, tuple[bool, bool]], by_node: dict[str, list[Obj]], hashed: str
    ) -> Exception | None:
        """kube's rollingUpdate: which old pods go now (and, surging, which nodes get a new pod)."""
        desired = [name for name, (should_run, _) in placed.items() if should_run]
        max_surge, max_unavailable = self._counts(ds, len(desired))
        if max_surge > 0:
            return await self._surge(key, ds, desired, max_surge, by_node, hashed)
        min_ready = int(spec(ds).get("minReadySeconds") or 0)
        now = self.wall()
        unavailable = 0
        replace: list[Obj] = []
        candidates: list[Obj] = []
        for name in desired:
            here = [p for p in by_node.get(name, ()) if _not_deleting(p)]
            new = [p for p in here if labels(p).get(history.REVISION_HASH_LABEL) == hashed]
            old = [p for p in here if p not in new]
            if len(here) != 1:
                unavailable += 1  # none, or several: placement is on it
                continue
            if new:
                if not is_available(new[0], min_ready, now):
                    unavailable += 1
            elif not is_available(old[0], min_ready, now):
                replace.append(old[0])
            elif unavailable < max_unavailable:
                candidates.append(old[0])
        room = max(0, min(max_unavailable - unavailable, len(candidates)))
        victims = replace + candidates[:room]
        if not victims:
            return None
        self.expectations.expect(key, 0, [key_of(p) for p in victims])
        results = await asyncio.gather(*(self._delete_pod(key, ds, p) for p in victims), return_exceptions=True)
        errors = [r for r in results if isinstance(r, Exception)]
        return errors[0] if errors else None

    async def _surge(
        self, key: str, ds: Obj, desired: list[str], max_surge: int, by_node: dict[str, list[Obj]], hashed: str
    ) -> Exception | None:
        """kube's rollingUpdate with surge: a node whose old pod is unavailable gets its new pod
        at once, others while fewer than `max_surge` nodes wait for theirs; an old pod goes once
        the new one beside it is available."""
        min_ready = int(spec(ds).get("minReadySeconds") or 0)
        now = self.wall()
        waiting = 0
        old_to_delete: list[Obj] = []
        allowed: list[str] = []
        candidates: list[str] = []
        for name in desired:
            here = sorted((p for p in by_node.get(name, ()) if _not_deleting(p)), key=_created)
            new = [p for p in here if labels(p).get(history.REVISION_HASH_LABEL) == hashed]
            old = [p for p in here if p not in new]
            if len(new) > 1 or len(old) > 1:
                waiting += 1  # placement is cleaning this node up
            elif not old:
                continue  # new only, or nothing: placement's business
            elif not new:
                if not is_available(old[0], min_ready, now):
                    allowed.append(name)  # nothing to keep available here: replace at once
                elif waiting < max_surge:
                    candidates.append(name)
            elif not is_available(new[0], min_ready, now):
                waiting += 1
            else:
                old_to_delete.append(old[0])
        room = max(0, min(max_surge - waiting, len(candidates)))
        create = allowed + candidates[:room]
        if not create and not old_to_delete:
            return None
        self.expectations.expect(key, len(create), [key_of(p) for p in old_to_delete])
        results = await asyncio.gather(
            *(self._create_pod(key, ds, n, hashed) for n in create),
            *(self._delete_pod(key, ds, p) for p in old_to_delete),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, Exception)]
        return errors[0] if errors else None

    # -- status -------------------------------------------------------------------------------

    async def _write_status(
        self, ds: Obj, placed: dict[str, tuple[bool, bool]], by_node: dict[str, list[Obj]], hashed: str
    ) -> None:
        min_ready = int(spec(ds).get("minReadySeconds") or 0)
        now = self.wall()
        desired = current = misscheduled = ready = available = updated = 0
        for name, (should_run, _) in placed.items():
            here = [p for p in by_node.get(name, ()) if _not_deleting(p)]
            if should_run:
                desired += 1
                if here:
                    current += 1
                    oldest = min(here, key=_created)
                    if is_ready(oldest):
                        ready += 1
                        if is_available(oldest, min_ready, now):
                            available += 1
                    if any(labels(p).get(history.REVISION_HASH_LABEL) == hashed for p in here):
                        updated += 1
            elif here:
                misscheduled += 1
        new: dict[str, Any] = dict(status(ds))
        new.update(
            desiredNumberScheduled=desired,
            currentNumberScheduled=current,
            numberMisscheduled=misscheduled,
            numberReady=ready,
            numberAvailable=available,
            numberUnavailable=max(0, desired - available),
            updatedNumberScheduled=updated,
        )
        if metadata(ds).get("generation") is not None:
            new["observedGeneration"] = metadata(ds)["generation"]
        for zero in ("numberAvailable", "numberUnavailable", "updatedNumberScheduled"):
            if not new.get(zero):
                new.pop(zero, None)  # omitempty in kube's status
        if new == status(ds):
            return
        m = metadata(ds)
        with contextlib.suppress(NotFoundError):
            await self.client.replace(
                DAEMON_SETS.path(m.get("namespace"), m.get("name"), "status"), {**ds, "status": new}
            )
