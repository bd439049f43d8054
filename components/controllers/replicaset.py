"""The replicaset controller: `spec.replicas` pods matching each ReplicaSet's selector; and the
replicationcontroller controller, the same one over ReplicationControllers (kube runs its
ReplicaSet controller over them too), whose selector is a plain label map.

Keys are `namespace/name` of ReplicaSets.  A reconcile claims the namespace's active pods
(adopts orphans that match the selector, releases owned pods that no longer match), creates
the missing pods in slow-start batches (1, 2, 4, ...; a failure stops the rest) or deletes the
surplus in kube's order (`_workload_pods.pods_to_delete`), then writes `status`.  Creations and
deletions are recorded as expectations first and act again only once the pod informer has
shown them all (or after 5 minutes), so a burst of events never creates or deletes twice.
Each creation and deletion is told in an event (SuccessfulCreate, FailedCreate, ...), and a
failed one sets the `ReplicaFailure` condition until a reconcile manages again (conformance
"should surface a failure condition on a common issue like exceeded quota")."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable
from typing import Any

from components.client.events import NORMAL, WARNING, ObjectRef, reference
from components.client.indexer import NAMESPACE_INDEX, OWNER_UID_INDEX, key_of
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import ApiError, ForbiddenError, NotFoundError
from components.controllers._claim import claim_pods
from components.controllers._workload_expectations import Expectations
from components.controllers._workload_pods import (
    available_in,
    is_active,
    is_available,
    owner_ref,
    pods_to_delete,
    selector_matches,
)
from components.controllers.base import Controller, Requeue
from machinery.objects import Obj, controller_ref, labels, metadata, spec, status
from machinery.pods import is_ready

REPLICA_SETS = Resource("apps", "v1", "replicasets", kind="ReplicaSet")
REPLICATION_CONTROLLERS = Resource("", "v1", "replicationcontrollers", kind="ReplicationController")
PODS = Resource("", "v1", "pods", kind="Pod")
BURST_REPLICAS = 500  # at most this many creations or deletions per reconcile (kube's burstReplicas)
SLOW_START_INITIAL_BATCH = 1


async def slow_start_batch(count: int, initial: int, fn: Callable[[], Awaitable[None]]) -> tuple[int, Exception | None]:
    """Call `fn` `count` times in batches of growing size (initial, 2x, 4x, ...), each batch
    concurrently; the first batch with a failure is the last.  Returns (successes, an error)."""
    done, remaining, batch = 0, count, min(count, initial)
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        done += batch - len(errors)
        if errors:
            first = errors[0]
            if not isinstance(first, Exception):
                raise first
            return done, first
        remaining -= batch
        batch = min(2 * batch, remaining)
    return done, None


class ReplicaSetController(Controller):
    name = "replicaset"
    workers = 5
    wall: Callable[[], float] = staticmethod(time.time)  # for minReadySeconds; tests replace it
    owners: Resource = REPLICA_SETS  # what this controller keeps replicas of

    @staticmethod
    def selector(owner: Obj) -> Any:
        """The owner's pod selector as a LabelSelector (a ReplicaSet's is one)."""
        return spec(owner).get("selector")

    def setup(self) -> None:
        self.expectations = Expectations(self.clock.now)
        self.replicasets = self.factory.informer(self.owners)
        self.pods = self.factory.informer(PODS)
        self.replicasets.add_handler(
            EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n), on_delete=self._rs_deleted)
        )
        self.pods.add_handler(
            EventHandler(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)
        )

    # -- events ---------------------------------------------------------------------------------

    def _rs_deleted(self, rs: Obj) -> None:
        self.expectations.forget(key_of(rs))
        self.enqueue(rs)

    def _owner_key(self, pod: Obj, ref: Obj | None) -> str | None:
        """The key of the ReplicaSet `ref` names, when it is one we hold (same UID)."""
        if ref is None or ref.get("kind") != self.owners.kind:
            return None
        key = f"{metadata(pod).get('namespace')}/{ref.get('name')}"
        rs = self.replicasets.indexer.get(key)
        return key if rs is not None and metadata(rs).get("uid") == ref.get("uid") else None

    def _matching(self, pod: Obj) -> list[str]:
        """Keys of the ReplicaSets in the pod's namespace whose selector matches it (for orphans)."""
        ns, found = metadata(pod).get("namespace") or "", labels(pod)
        return [
            key_of(rs)
            for rs in self.replicasets.indexer.by_index(NAMESPACE_INDEX, ns)
            if selector_matches(self.selector(rs), found)
        ]

    def _pod_added(self, pod: Obj) -> None:
        if metadata(pod).get("deletionTimestamp"):
            self._pod_deleted(pod)  # a restarted controller sees a pod already going: a deletion
            return
        ref = controller_ref(pod)
        if ref is not None:
            key = self._owner_key(pod, ref)
            if key is not None:
                self.expectations.creation_observed(key)
                self.queue.add(key)
            return
        for key in self._matching(pod):
            self.queue.add(key)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if metadata(old).get("resourceVersion") == metadata(new).get("resourceVersion"):
            return
        label_changed = labels(old) != labels(new)
        if metadata(new).get("deletionTimestamp"):
            self._pod_deleted(new)
            if label_changed:
                self._pod_deleted(old)
            return
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        ref_changed = (old_ref or {}).get("uid") != (new_ref or {}).get("uid")
        if ref_changed and old_ref is not None:
            key = self._owner_key(old, old_ref)
            if key is not None:
                self.queue.add(key)
        if new_ref is not None:
            key = self._owner_key(new, new_ref)
            if key is not None:
                self.queue.add(key)
            return
        if label_changed or ref_changed:
            for key in self._matching(new):
                self.queue.add(key)

    def _pod_deleted(self, pod: Obj) -> None:
        key = self._owner_key(pod, controller_ref(pod))
        if key is not None:
            self.expectations.deletion_observed(key, key_of(pod))
            self.queue.add(key)

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        rs = self.replicasets.indexer.get(key)
        if rs is None:
            self.expectations.forget(key)
            return
        needs_sync = self.expectations.satisfied(key)
        pods = await self._claim(rs)
        error: Exception | None = None
        if needs_sync and not metadata(rs).get("deletionTimestamp"):
            error = await self._manage(key, rs, pods)
        now = self.wall()
        min_ready = int(spec(rs).get("minReadySeconds") or 0)
        await self._write_status(rs, pods, now, error)
        if error is not None:
            raise error
        waits = [w for w in (available_in(p, min_ready, now) for p in pods) if w is not None]
        if waits:
            raise Requeue(after=min(waits) + 0.05)  # look again when the next pod becomes available

    async def _claim(self, rs: Obj) -> list[Obj]:
        """The active pods this ReplicaSet owns after adopting matching orphans and releasing
        owned pods that no longer match (kube's ClaimPods: _claim.py)."""
        ns = metadata(rs).get("namespace") or ""
        return await claim_pods(
            self.client,
            rs,
            self.selector(rs),
            self.pods.indexer.by_index(NAMESPACE_INDEX, ns),
            owner_ref(rs, self.owners.kind, self.owners.group_version),
            is_active,
        )

    async def _manage(self, key: str, rs: Obj, pods: list[Obj]) -> Exception | None:
        replicas = spec(rs).get("replicas")
        want = int(replicas) if isinstance(replicas, int) else 1
        diff = len(pods) - want
        if diff < 0:
            count = min(-diff, BURST_REPLICAS)
            self.expectations.expect_creations(key, count)
            done, error = await slow_start_batch(count, SLOW_START_INITIAL_BATCH, lambda: self._create_pod(rs))
            for _ in range(count - done):
                self.expectations.creation_observed(key)  # never coming: do not wait for them
            return error
        if diff > 0:
            count = min(diff, BURST_REPLICAS)
            victims = pods_to_delete(pods, self._related_pods(rs, pods), count, self.wall())
            self.expectations.expect_deletions(key, [key_of(p) for p in victims])
            results = await asyncio.gather(*(self._delete_pod(key, p, rs) for p in victims), return_exceptions=True)
            errors = [r for r in results if isinstance(r, Exception)]
            return errors[0] if errors else None
        return None

    def _related_pods(self, rs: Obj, pods: list[Obj]) -> list[Obj]:
        """Active pods of every ReplicaSet sharing this one's controlling owner (else its own)."""
        owner = controller_ref(rs)
        if owner is None:
            return pods
        ns = metadata(rs).get("namespace") or ""
        siblings = [
            metadata(other).get("uid")
            for other in self.replicasets.indexer.by_index(NAMESPACE_INDEX, ns)
            if (controller_ref(other) or {}).get("uid") == owner.get("uid")
        ]
        return [p for uid in siblings if uid for p in self.pods.indexer.by_index(OWNER_UID_INDEX, uid) if is_active(p)]

    async def _create_pod(self, rs: Obj) -> None:
        template = spec(rs).get("template") or {}
        tmeta = template.get("metadata") or {}
        body_meta: Obj = {
            "generateName": f"{metadata(rs).get('name')}-",
            "ownerReferences": [owner_ref(rs, self.owners.kind, self.owners.group_version)],
        }
        for field in ("labels", "annotations", "finalizers"):
            if tmeta.get(field):
                body_meta[field] = copy.deepcopy(tmeta[field])
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": body_meta, "spec": copy.deepcopy(template.get("spec"))}
        try:
            created = await self.client.create(PODS.path(metadata(rs).get("namespace")), body)
        except ForbiddenError as e:
            if "being terminated" in e.message:
                return  # the namespace is going: its pods are not wanted
            self.events.record(self._ref(rs), WARNING, "FailedCreate", f"Error creating: {e.message}")
            raise
        except ApiError as e:
            self.events.record(self._ref(rs), WARNING, "FailedCreate", f"Error creating: {e.message}")
            raise
        self.events.record(self._ref(rs), NORMAL, "SuccessfulCreate", f"Created pod: {metadata(created).get('name')}")

    def _ref(self, rs: Obj) -> ObjectRef:
        return reference(rs, self.owners.group_version, self.owners.kind)

    async def _delete_pod(self, key: str, pod: Obj, rs: Obj) -> None:
        m = metadata(pod)
        try:
            await self.client.delete(
                PODS.path(m.get("namespace"), m.get("name")), {"preconditions": {"uid": m.get("uid")}}
            )
        except ApiError as e:
            self.expectations.deletion_observed(key, key_of(pod))  # it will not be observed going
            if not isinstance(e, NotFoundError):
                self.events.record(self._ref(rs), WARNING, "FailedDelete", f"Error deleting: {e.message}")
                raise
            return
        self.events.record(self._ref(rs), NORMAL, "SuccessfulDelete", f"Deleted pod: {m.get('name')}")

    async def _write_status(self, rs: Obj, pods: list[Obj], now: float, error: Exception | None = None) -> None:
        template_labels = ((spec(rs).get("template") or {}).get("metadata") or {}).get("labels") or {}
        min_ready = int(spec(rs).get("minReadySeconds") or 0)
        new: Obj = dict(status(rs))
        new.update(
            replicas=len(pods),
            fullyLabeledReplicas=sum(1 for p in pods if all(labels(p).get(k) == v for k, v in template_labels.items())),
            readyReplicas=sum(1 for p in pods if is_ready(p)),
            availableReplicas=sum(1 for p in pods if is_available(p, min_ready, now)),
        )
        if metadata(rs).get("generation") is not None:
            new["observedGeneration"] = metadata(rs)["generation"]
        new["conditions"] = _with_replica_failure(new.get("conditions"), rs, len(pods), error, now)
        if not new["conditions"]:
            del new["conditions"]
        if new == status(rs):
            return
        body = {**rs, "status": new}
        m = metadata(rs)
        await self.client.replace(self.owners.path(m.get("namespace"), m.get("name"), "status"), body)


def _with_replica_failure(held: Any, rs: Obj, count: int, error: Exception | None, now: float) -> list[Obj]:
    """kube's calculateStatus: a failed create or delete adds `ReplicaFailure` (once: the first
    error's words stay), a reconcile that manages removes it."""
    conditions = [c for c in held or () if isinstance(c, dict)]
    failed = next((c for c in conditions if c.get("type") == "ReplicaFailure"), None)
    if error is not None and failed is None:
        replicas = spec(rs).get("replicas")
        want = int(replicas) if isinstance(replicas, int) else 1
        reason = "FailedCreate" if count < want else "FailedDelete" if count > want else ""
        message = error.message if isinstance(error, ApiError) else str(error)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        entry = {"type": "ReplicaFailure", "status": "True", "lastTransitionTime": stamp, "message": message}
        conditions.append({**entry, "reason": reason} if reason else entry)
    elif error is None and failed is not None:
        conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
    return conditions


class ReplicationManager(ReplicaSetController):
    """kube's replicationcontroller controller: ReplicationControllers, whose `spec.selector` is
    a map of labels every pod must carry (the apiserver defaults it to the template's labels)."""

    name = "replicationcontroller"
    owners = REPLICATION_CONTROLLERS

    @staticmethod
    def selector(owner: Obj) -> Any:
        found = spec(owner).get("selector")
        return {"matchLabels": found} if isinstance(found, dict) else None
