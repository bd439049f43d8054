"""The statefulset controller: `spec.replicas` pods with stable names, made and updated in order.

Keys are `namespace/name` of StatefulSets.  A reconcile, as kube's defaultStatefulSetControl:

1. revisions: the update revision is the ControllerRevision of the current template (made, or
   an old one renumbered on a rollback: `_history.sync_revision`); the current revision is the
   one `status.currentRevision` names (the update revision for a new set);
2. pods are claimed by selector and placed by ordinal (`<set>-<n>`, `_stateful_pods`); a missing
   one is made, from the current revision below the RollingUpdate partition and from the
   update revision otherwise, after its volume claims; a failed one is deleted (and made again
   next pass); ordinals past the end are condemned, highest first.  `OrderedReady` does one
   thing a pass and stops at the first member that is not running and ready (so scaling
   halts on an unhealthy pod); `Parallel` makes and deletes all at once;
3. RollingUpdate: from the highest ordinal down to the partition, the first pod not on the
   update revision is deleted (it comes back on it), one at a time, each waited for;
   OnDelete replaces a pod only when someone deletes it;
4. status: replicas, ready, available, current and updated counts and revisions; once every
   pod is updated and ready, the update revision becomes the current one;
5. history past revisionHistoryLimit that no pod uses is pruned.

Claims are kept, unless `persistentVolumeClaimRetentionPolicy` says Delete: whenDeleted makes
the set their owner (the garbage collector takes them with it), whenScaled makes a condemned
pod their owner before it goes, as kube's.  Binding them is the storage part of the kinds
issue.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from components.client.events import NORMAL, WARNING, ObjectRef, reference
from components.client.indexer import NAMESPACE_INDEX
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import AlreadyExistsError, ApiError, ForbiddenError, NotFoundError
from components.controllers import _history as history
from components.controllers import _stateful_pods as sp
from components.controllers._claim import claim_pods
from components.controllers._workload_pods import available_in, is_available, owner_ref, selector_matches
from components.controllers.base import Controller, Requeue
from machinery.objects import Obj, controller_ref, labels, metadata, spec, status

STATEFUL_SETS = Resource("apps", "v1", "statefulsets", kind="StatefulSet")
PODS = Resource("", "v1", "pods", kind="Pod")
CLAIMS = Resource("", "v1", "persistentvolumeclaims", kind="PersistentVolumeClaim")
REVISIONS = history.REVISIONS


class StatefulSetController(Controller):
    name = "statefulset"
    workers = 2
    wall: Callable[[], float] = staticmethod(time.time)

    def setup(self) -> None:
        self.sets = self.factory.informer(STATEFUL_SETS)
        self.pods = self.factory.informer(PODS)
        self.revisions = self.factory.informer(REVISIONS)
        self.sets.add_handler(EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n)))
        owned = EventHandler(on_add=self._owned, on_update=self._updated, on_delete=self._owned)
        self.pods.add_handler(owned)
        self.revisions.add_handler(EventHandler(on_add=self._owned, on_delete=self._owned))

    def _owned(self, obj: Obj) -> None:
        ref = controller_ref(obj)
        ns = metadata(obj).get("namespace") or ""
        if ref is not None:
            if ref.get("kind") == "StatefulSet":
                self.queue.add(f"{ns}/{ref.get('name')}")
            return
        for sts in self.sets.indexer.by_index(NAMESPACE_INDEX, ns):  # an orphan: who may adopt it
            if selector_matches(spec(sts).get("selector"), labels(obj)):
                self.enqueue(sts)

    def _updated(self, old: Obj, new: Obj) -> None:
        self._owned(new)
        if controller_ref(old) != controller_ref(new):
            self._owned(old)

    # -- reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        sts = self.sets.indexer.get(key)
        if sts is None or metadata(sts).get("deletionTimestamp"):
            return
        uid = metadata(sts).get("uid")
        ns = metadata(sts).get("namespace") or ""
        revisions = [
            r
            for r in self.revisions.indexer.by_index(NAMESPACE_INDEX, ns)
            if (controller_ref(r) or {}).get("uid") == uid
        ]
        update = await history.sync_revision(self.client, sts, STATEFUL_SETS, revisions)
        if update not in revisions:
            revisions = [r for r in revisions if metadata(r).get("name") != metadata(update).get("name")] + [update]
        named = {metadata(r).get("name"): r for r in revisions}
        current = named.get(status(sts).get("currentRevision")) or update
        pods = await claim_pods(
            self.client,
            sts,
            spec(sts).get("selector") or {},
            self.pods.indexer.by_index(NAMESPACE_INDEX, ns),
            owner_ref(sts, "StatefulSet", "apps/v1"),
            lambda _p: True,
        )
        set_name = str(metadata(sts).get("name"))
        by_ordinal = {o: p for p in pods if (o := sp.ordinal_of(set_name, p)) is not None}
        now = self.wall()
        await self._manage(sts, by_ordinal, current, update, now)
        await self._write_status(sts, by_ordinal, current, update, now)
        await self._prune_history(sts, revisions, {metadata(current).get("name"), metadata(update).get("name")}, pods)
        min_ready = int(spec(sts).get("minReadySeconds") or 0)
        waits = [w for w in (available_in(p, min_ready, now) for p in by_ordinal.values()) if w is not None]
        if waits:
            raise Requeue(after=min(waits) + 0.05)

    async def _manage(self, sts: Obj, pods: dict[int, Obj], current: Obj, update: Obj, now: float) -> None:
        start, count = sp.start_ordinal(sts), sp.replicas_of(sts)
        wanted = range(start, start + count)
        ordered = not sp.parallel(sts)
        min_ready = int(spec(sts).get("minReadySeconds") or 0)
        for ordinal in wanted:
            pod = pods.get(ordinal)
            if pod is None:
                await self._create(sts, ordinal, current, update)
                if ordered:
                    return
                continue
            if sp.failed(pod) and not sp.terminating(pod):
                await self._delete(sts, pod)
                if ordered:
                    return
                continue
            if ordered and not sp.healthy(pod, min_ready, now):
                return  # wait for it before the next ordinal (and before any update)
        condemned = sorted((o for o in pods if o not in wanted), reverse=True)
        for ordinal in condemned:
            pod = pods[ordinal]
            if sp.terminating(pod):
                if ordered:
                    return
                continue
            if ordered and any(not sp.healthy(p, min_ready, now) for o, p in pods.items() if o != ordinal):
                return  # ordered scale-down waits for every other member to be healthy
            if sp.retention(sts, "whenScaled") == "Delete":
                await self._hand_claims_to(sts, pod)
            await self._delete(sts, pod)
            if ordered:
                return
        if not sp.rolling(sts):
            return
        update_name = metadata(update).get("name")
        for ordinal in range(start + count - 1, start + sp.partition(sts) - 1, -1):
            pod = pods.get(ordinal)
            if pod is None:
                return
            if labels(pod).get(history.REVISION_HASH_LABEL) != update_name and not sp.terminating(pod):
                await self._delete(sts, pod)
                return
            if not sp.healthy(pod, min_ready, now):
                return

    async def _hand_claims_to(self, sts: Obj, pod: Obj) -> None:
        """A condemned pod becomes its claims' owner, so they go with it (whenScaled: Delete)."""
        ns = metadata(sts).get("namespace")
        ref = sp.claim_owner(pod, "Pod", "v1")
        for claim in sp.claims_for(sts, str(metadata(pod).get("name"))):
            name = metadata(claim)["name"]
            with contextlib.suppress(NotFoundError):
                current = await self.client.get(CLAIMS.path(ns, name))
                # the pod alone: with the set still an owner the collector would keep the claim
                others = (ref["uid"], metadata(sts).get("uid"))
                refs = [r for r in metadata(current).get("ownerReferences") or () if r.get("uid") not in others]
                await self.client.patch(CLAIMS.path(ns, name), {"metadata": {"ownerReferences": [*refs, ref]}})

    def _ref(self, sts: Obj) -> ObjectRef:
        return reference(sts, "apps/v1", "StatefulSet")

    async def _create(self, sts: Obj, ordinal: int, current: Obj, update: Obj) -> None:
        below_partition = sp.rolling(sts) and ordinal < sp.start_ordinal(sts) + sp.partition(sts)
        revision = current if below_partition else update
        pod = sp.new_pod(sts, sp.revision_template(revision), str(metadata(revision).get("name")), ordinal)
        ns = metadata(sts).get("namespace")
        set_name = metadata(sts).get("name")
        pod_name = metadata(pod)["name"]
        for claim in sp.claims_for(sts, pod_name):
            try:
                await self.client.create(CLAIMS.path(ns), claim)
            except AlreadyExistsError:
                continue
            except ApiError as e:
                message = f"create Claim {metadata(claim)['name']} for Pod {pod_name} in StatefulSet {set_name} failed"
                self.events.record(self._ref(sts), WARNING, "FailedCreate", f"{message} error: {e.message}")
                raise
            message = f"create Claim {metadata(claim)['name']} Pod {pod_name} in StatefulSet {set_name} success"
            self.events.record(self._ref(sts), NORMAL, "SuccessfulCreate", message)
        try:
            await self.client.create(PODS.path(ns), pod)
        except AlreadyExistsError:
            return  # the informer has not shown it yet
        except ApiError as e:
            if isinstance(e, ForbiddenError) and "being terminated" in e.message:
                return
            message = f"create Pod {pod_name} in StatefulSet {set_name} failed error: {e.message}"
            self.events.record(self._ref(sts), WARNING, "FailedCreate", message)
            raise
        message = f"create Pod {pod_name} in StatefulSet {set_name} successful"
        self.events.record(self._ref(sts), NORMAL, "SuccessfulCreate", message)

    async def _delete(self, sts: Obj, pod: Obj) -> None:
        m = metadata(pod)
        try:
            await self.client.delete(
                PODS.path(m.get("namespace"), m.get("name")), {"preconditions": {"uid": m.get("uid")}}
            )
        except NotFoundError:
            return
        except ApiError as e:
            message = f"delete Pod {m.get('name')} in StatefulSet {metadata(sts).get('name')} failed error: {e.message}"
            self.events.record(self._ref(sts), WARNING, "FailedDelete", message)
            raise
        message = f"delete Pod {m.get('name')} in StatefulSet {metadata(sts).get('name')} successful"
        self.events.record(self._ref(sts), NORMAL, "SuccessfulDelete", message)

    # -- status and history -------------------------------------------------------------------

    async def _write_status(self, sts: Obj, pods: dict[int, Obj], current: Obj, update: Obj, now: float) -> None:
        min_ready = int(spec(sts).get("minReadySeconds") or 0)
        current_name, update_name = metadata(current).get("name"), metadata(update).get("name")
        live = [p for p in pods.values() if not sp.terminating(p)]
        counts = {
            "replicas": len(pods),
            "readyReplicas": sum(1 for p in live if sp.running_and_ready(p)),
            "availableReplicas": sum(1 for p in live if sp.running_and_ready(p) and is_available(p, min_ready, now)),
            "currentReplicas": sum(1 for p in live if labels(p).get(history.REVISION_HASH_LABEL) == current_name),
            "updatedReplicas": sum(1 for p in live if labels(p).get(history.REVISION_HASH_LABEL) == update_name),
        }
        new: dict[str, Any] = dict(status(sts))
        new.update(counts, currentRevision=current_name, updateRevision=update_name)
        want = sp.replicas_of(sts)
        if (
            sp.rolling(sts)
            and counts["updatedReplicas"] == want
            and counts["readyReplicas"] == want
            and counts["replicas"] == want
        ):
            new["currentReplicas"], new["currentRevision"] = counts["updatedReplicas"], update_name
        if metadata(sts).get("generation") is not None:
            new["observedGeneration"] = metadata(sts)["generation"]
        for member in ("readyReplicas", "availableReplicas", "currentReplicas", "updatedReplicas"):
            if not new.get(member):
                new.pop(member, None)  # omitempty in kube's status
        new.setdefault("availableReplicas", 0)  # not omitempty
        if new == status(sts):
            return
        m = metadata(sts)
        with contextlib.suppress(NotFoundError):
            await self.client.replace(
                STATEFUL_SETS.path(m.get("namespace"), m.get("name"), "status"), {**sts, "status": new}
            )

    async def _prune_history(self, sts: Obj, revisions: list[Obj], keep: set[Any], pods: list[Obj]) -> None:
        limit = spec(sts).get("revisionHistoryLimit")
        limit = limit if isinstance(limit, int) else 10
        in_use = {labels(p).get(history.REVISION_HASH_LABEL) for p in pods if not sp.terminating(p)}
        unused = [r for r in revisions if metadata(r).get("name") not in keep | in_use]
        unused.sort(key=history.revision_number)
        for revision in unused[: max(0, len(revisions) - max(limit, 0))]:  # kube's truncateHistory
            m = metadata(revision)
            with contextlib.suppress(NotFoundError):
                await self.client.delete(REVISIONS.path(m.get("namespace"), m.get("name")))
