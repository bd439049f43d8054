"""The deployment controller: rolls a Deployment's pod template out through ReplicaSets.

Keys are `namespace/name` of Deployments.  A reconcile claims the namespace's ReplicaSets
(adopt matching orphans, release non-matching owned ones), then, as kube's syncDeployment:
a paused deployment or a size change is only scaled (proportionally during a rollout); else
the strategy runs one step (RollingUpdate: grow the new ReplicaSet within maxSurge, shrink old
ones within maxUnavailable; Recreate: old ones to zero, wait for their pods, then the new one),
old zero-sized ReplicaSets beyond revisionHistoryLimit go, and status and conditions are
written.  The arithmetic is `_workload_rollout`; this module only reads informers and writes.

The new ReplicaSet is `<deployment>-<hash>`, the hash as documented in
`_workload_rollout.template_hash`; the revision annotation of the Deployment is written through
the main resource, as kube's controller does.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from typing import Any

from components.client.events import NORMAL, reference
from components.client.indexer import NAMESPACE_INDEX, OWNER_UID_INDEX
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import AlreadyExistsError, NotFoundError
from components.controllers import _workload_rollout as ro
from components.controllers._workload_pods import owner_ref, selector_matches
from components.controllers.base import Controller, Requeue
from components.controllers.replicaset import PODS, REPLICA_SETS
from machinery.objects import Obj, controller_ref, labels, metadata, spec, status
from machinery.timestamps import format_time

DEPLOYMENTS = Resource("apps", "v1", "deployments", kind="Deployment")


class DeploymentController(Controller):
    name = "deployment"
    workers = 5
    wall: Callable[[], float] = staticmethod(time.time)

    def setup(self) -> None:
        self.deployments = self.factory.informer(DEPLOYMENTS)
        self.replicasets = self.factory.informer(REPLICA_SETS)
        self.pods = self.factory.informer(PODS)
        self.deployments.add_handler(
            EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n), on_delete=self.enqueue)
        )
        self.replicasets.add_handler(
            EventHandler(on_add=self._rs_changed, on_update=self._rs_updated, on_delete=self._rs_changed)
        )
        self.pods.add_handler(EventHandler(on_delete=self._pod_deleted))

    # -- events ---------------------------------------------------------------------------------

    def _owner_key(self, obj: Obj, kind: str, informer_get: Callable[[str], Obj | None]) -> str | None:
        ref = controller_ref(obj)
        if ref is None or ref.get("kind") != kind:
            return None
        key = f"{metadata(obj).get('namespace')}/{ref.get('name')}"
        owner = informer_get(key)
        return key if owner is not None and metadata(owner).get("uid") == ref.get("uid") else None

    def _rs_changed(self, rs: Obj) -> None:
        key = self._owner_key(rs, "Deployment", self.deployments.indexer.get)
        if key is not None:
            self.queue.add(key)
        elif controller_ref(rs) is None:  # an orphan: whoever might adopt it
            for d in self.deployments.indexer.by_index(NAMESPACE_INDEX, metadata(rs).get("namespace") or ""):
                if selector_matches(spec(d).get("selector"), labels(rs)):
                    self.enqueue(d)

    def _rs_updated(self, old: Obj, new: Obj) -> None:
        if (controller_ref(old) or {}).get("uid") != (controller_ref(new) or {}).get("uid"):
            self._rs_changed(old)
        self._rs_changed(new)

    def _pod_deleted(self, pod: Obj) -> None:
        """A Recreate rollout waits for the old pods to go: their deletion is news."""
        rs_key = self._owner_key(pod, "ReplicaSet", self.replicasets.indexer.get)
        rs = self.replicasets.indexer.get(rs_key) if rs_key else None
        if rs is not None:
            key = self._owner_key(rs, "Deployment", self.deployments.indexer.get)
            if key is not None:
                self.queue.add(key)

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        found = self.deployments.indexer.get(key)
        if found is None:
            return
        d = copy.deepcopy(found)
        if not spec(d).get("selector"):
            return
        rss = await self._claim(d)
        if metadata(d).get("deletionTimestamp"):
            new_rs, olds = self._split(d, rss)
            await self._write_status(d, ro.calculate_status(d, [*olds, new_rs], new_rs, self._now_text()))
            return
        d = await self._paused_conditions(d)
        if spec(d).get("paused") or ro.is_scaling_event(d, rss):
            await self._sync(d, rss)
            return
        if ro.is_rolling(d):
            await self._rolling(d, rss)
        else:
            await self._recreate(d, rss)

    def _now_text(self) -> str:
        return format_time(self.wall())

    async def _claim(self, d: Obj) -> list[Obj]:
        m = metadata(d)
        uid, selector, deleting = m.get("uid"), spec(d).get("selector"), bool(m.get("deletionTimestamp"))
        owned: list[Obj] = []
        for rs in self.replicasets.indexer.by_index(NAMESPACE_INDEX, m.get("namespace") or ""):
            ref = controller_ref(rs)
            matches = selector_matches(selector, labels(rs))
            if ref is not None and ref.get("uid") == uid:
                if matches or deleting:
                    owned.append(rs)
                else:
                    await self._set_owners(
                        rs, [r for r in metadata(rs).get("ownerReferences") or () if r.get("uid") != uid]
                    )
            elif ref is None and matches and not deleting and not metadata(rs).get("deletionTimestamp"):
                refs = [*(metadata(rs).get("ownerReferences") or ()), owner_ref(d, "Deployment", "apps/v1")]
                adopted = await self._set_owners(rs, refs)
                if adopted is not None:
                    owned.append(adopted)
        return owned

    async def _set_owners(self, rs: Obj, refs: list[Any]) -> Obj | None:
        m = metadata(rs)
        patch = [
            {"op": "test", "path": "/metadata/uid", "value": m.get("uid")},
            {"op": "test", "path": "/metadata/resourceVersion", "value": m.get("resourceVersion")},
            {"op": "add", "path": "/metadata/ownerReferences", "value": refs},
        ]
        try:
            return await self.client.patch(REPLICA_SETS.path(m.get("namespace"), m.get("name")), patch, "json")
        except NotFoundError:
            return None

    def _split(self, d: Obj, rss: list[Obj]) -> tuple[Obj | None, list[Obj]]:
        new_rs = ro.find_new(d, rss)
        return new_rs, [rs for rs in rss if new_rs is None or metadata(rs).get("uid") != metadata(new_rs).get("uid")]

    # -- strategies ---------------------------------------------------------------------------

    async def _sync(self, d: Obj, rss: list[Obj]) -> None:
        """Scale only (a paused deployment, or a size change): kube's sync."""
        new_rs, olds = await self._new_and_old(d, rss, create=False)
        sizes = ro.proportional_sizes(d, new_rs, olds)
        for rs, size in sizes:
            updated = await self._scale(d, rs, size)
            new_rs, olds = _replace_in(updated, new_rs, olds)
        if spec(d).get("paused"):
            await self._cleanup(d, olds)
        await self._write_status(d, ro.calculate_status(d, [*olds, new_rs], new_rs, self._now_text()))

    async def _rolling(self, d: Obj, rss: list[Obj]) -> None:
        new_rs, olds = await self._new_and_old(d, rss, create=True)
        assert new_rs is not None
        want = ro.replicas_of(d)
        if ro.replicas_of(new_rs) != want:
            size = want if ro.replicas_of(new_rs) > want else ro.new_rs_replicas(d, [*olds, new_rs], new_rs)
            if size != ro.replicas_of(new_rs):
                new_rs = await self._scale(d, new_rs, size)
                await self._rollout_status(d, [*olds, new_rs], new_rs)
                return
        plan = ro.old_scale_down(d, ro.active(olds), new_rs)
        for rs, size in plan:
            updated = await self._scale(d, rs, size)
            new_rs, olds = _replace_in(updated, new_rs, olds)
        if not plan and ro.complete(d, status(d)):
            await self._cleanup(d, olds)
        await self._rollout_status(d, [*olds, new_rs], new_rs)

    async def _recreate(self, d: Obj, rss: list[Obj]) -> None:
        new_rs, olds = await self._new_and_old(d, rss, create=False)
        scaled = False
        for rs in ro.active(olds):
            updated = await self._scale(d, rs, 0)
            new_rs, olds = _replace_in(updated, new_rs, olds)
            scaled = True
        if scaled or self._old_pods_running(new_rs, olds):
            await self._rollout_status(d, [*olds, new_rs], new_rs)
            return
        if new_rs is None:
            new_rs, olds = await self._new_and_old(d, rss, create=True)
            assert new_rs is not None
        if ro.replicas_of(new_rs) != ro.replicas_of(d):
            new_rs = await self._scale(d, new_rs, ro.replicas_of(d))
        elif ro.complete(d, status(d)):
            await self._cleanup(d, olds)
        await self._rollout_status(d, [*olds, new_rs], new_rs)

    def _old_pods_running(self, new_rs: Obj | None, olds: list[Obj]) -> bool:
        if sum(ro.status_int(rs, "replicas") for rs in olds) > 0:
            return True
        for rs in olds:
            for pod in self.pods.indexer.by_index(OWNER_UID_INDEX, str(metadata(rs).get("uid"))):
                if status(pod).get("phase") not in ("Failed", "Succeeded"):
                    return True
        return False

    # -- the new replicaset ---------------------------------------------------------------------

    async def _new_and_old(self, d: Obj, rss: list[Obj], *, create: bool) -> tuple[Obj | None, list[Obj]]:
        """The new replicaset (made when `create`) and the old ones; revisions kept in step
        (kube's getAllReplicaSetsAndSyncRevision)."""
        existing, olds = self._split(d, rss)
        new_revision = max((ro.revision(rs) for rs in olds), default=0) + 1
        ns = metadata(d).get("namespace")
        if existing is not None:
            rs = existing
            annotations = ro.new_rs_annotations(
                d, dict(metadata(rs).get("annotations") or {}), new_revision, exists=True
            )
            min_ready = spec(d).get("minReadySeconds") or 0
            if (
                annotations != (metadata(rs).get("annotations") or {})
                or (spec(rs).get("minReadySeconds") or 0) != min_ready
            ):
                body = copy.deepcopy(rs)
                body["metadata"]["annotations"] = annotations
                body["spec"]["minReadySeconds"] = min_ready
                rs = await self.client.replace(REPLICA_SETS.path(ns, metadata(rs).get("name")), body)
            await self._set_revision(d, str(ro.revision(rs)))
            if ro.has_deadline(d) and ro.get_condition(status(d), "Progressing") is None:
                st = copy.deepcopy(status(d))
                msg = f'Found new replica set "{metadata(rs).get("name")}"'
                ro.set_condition(st, "Progressing", "True", ro.FOUND_NEW_RS, msg, self._now_text())
                await self._write_status(d, st)
            return rs, olds
        if not create:
            return None, olds
        return await self._create_new(d, olds, new_revision), olds

    async def _create_new(self, d: Obj, olds: list[Obj], new_revision: int) -> Obj:
        collisions = status(d).get("collisionCount")
        template = copy.deepcopy(spec(d).get("template") or {})
        hash_ = ro.template_hash(spec(d).get("template") or {}, collisions if isinstance(collisions, int) else None)
        template.setdefault("metadata", {}).setdefault("labels", {})[ro.HASH_LABEL] = hash_
        selector = copy.deepcopy(spec(d).get("selector") or {})
        selector.setdefault("matchLabels", {})[ro.HASH_LABEL] = hash_
        ns, name = metadata(d).get("namespace"), f"{metadata(d).get('name')}-{hash_}"
        rs: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [owner_ref(d, "Deployment", "apps/v1")],
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": spec(d).get("minReadySeconds") or 0,
                "selector": selector,
                "template": template,
            },
        }
        rs["spec"]["replicas"] = ro.new_rs_replicas(d, olds, rs) if ro.is_rolling(d) else ro.replicas_of(d)
        rs["metadata"]["annotations"] = ro.new_rs_annotations(d, {}, new_revision, exists=False)
        try:
            made = await self.client.create(REPLICA_SETS.path(ns), rs)
            replicas = rs["spec"]["replicas"]
            self.events.record(
                reference(d, "apps/v1", "Deployment"),
                NORMAL,
                "ScalingReplicaSet",
                f"Scaled up replica set {name} from 0 to {replicas}",
            )
        except AlreadyExistsError:
            found = await self.client.get(REPLICA_SETS.path(ns, name))
            ours = (controller_ref(found) or {}).get("uid") == metadata(d).get("uid")
            if ours and ro.equal_ignore_hash(spec(found).get("template"), spec(d).get("template")):
                return found  # made by an earlier reconcile the informer has not shown yet
            st = copy.deepcopy(status(d))
            st["collisionCount"] = int(collisions or 0) + 1
            await self._write_status(d, st)
            raise
        await self._set_revision(d, str(new_revision))
        if ro.has_deadline(d):
            st = copy.deepcopy(status(d))
            ro.set_condition(
                st, "Progressing", "True", ro.NEW_RS_CREATED, f'Created new replica set "{name}"', self._now_text()
            )
            await self._write_status(d, st)
        return made

    # -- writes ---------------------------------------------------------------------------------

    async def _scale(self, d: Obj, rs: Obj, size: int) -> Obj:
        """Size and replica annotations of one replicaset (kube's scaleReplicaSet)."""
        annotations = {**(metadata(rs).get("annotations") or {}), **ro.replicas_annotations(d)}
        if ro.replicas_of(rs) == size and annotations == (metadata(rs).get("annotations") or {}):
            return rs
        body = copy.deepcopy(rs)
        body["metadata"]["annotations"] = annotations
        body["spec"]["replicas"] = size
        scaled = await self.client.replace(
            REPLICA_SETS.path(metadata(rs).get("namespace"), metadata(rs).get("name")), body
        )
        was = ro.replicas_of(rs)
        if was != size:  # kube's words, as `kubectl describe deployment` shows them
            way = "up" if size > was else "down"
            said = f"Scaled {way} replica set {metadata(rs).get('name')} from {was} to {size}"
            self.events.record(reference(d, "apps/v1", "Deployment"), NORMAL, "ScalingReplicaSet", said)
        return scaled

    async def _set_revision(self, d: Obj, revision: str) -> None:
        annotations = metadata(d).setdefault("annotations", {})
        if annotations.get(ro.REVISION) == revision:
            return
        path = DEPLOYMENTS.path(metadata(d).get("namespace"), metadata(d).get("name"))
        patch = {
            "metadata": {"annotations": {ro.REVISION: revision}, "resourceVersion": metadata(d).get("resourceVersion")}
        }
        updated = await self.client.patch(path, patch, "merge")
        annotations[ro.REVISION] = revision
        metadata(d)["resourceVersion"] = metadata(updated).get("resourceVersion")

    async def _write_status(self, d: Obj, st: Obj) -> None:
        if st == status(d):
            return
        body = {**d, "status": st}
        updated = await self.client.replace(
            DEPLOYMENTS.path(metadata(d).get("namespace"), metadata(d).get("name"), "status"), body
        )
        d["status"] = st
        metadata(d)["resourceVersion"] = metadata(updated).get("resourceVersion")

    async def _rollout_status(self, d: Obj, all_rss: list[Obj | None], new_rs: Obj | None) -> None:
        now = self.wall()
        st, after = ro.rollout_status(d, all_rss, new_rs, now, format_time(now))
        await self._write_status(d, st)
        if after is not None:
            raise Requeue(after=after)

    async def _paused_conditions(self, d: Obj) -> Obj:
        if not ro.has_deadline(d):
            return d
        cond = ro.get_condition(status(d), "Progressing")
        if cond is not None and cond.get("reason") == ro.TIMED_OUT:
            return d
        paused_cond = cond is not None and cond.get("reason") == ro.PAUSED
        st = copy.deepcopy(status(d))
        if spec(d).get("paused") and not paused_cond:
            ro.set_condition(st, "Progressing", "Unknown", ro.PAUSED, "Deployment is paused", self._now_text())
        elif not spec(d).get("paused") and paused_cond:
            ro.set_condition(st, "Progressing", "Unknown", ro.RESUMED, "Deployment is resumed", self._now_text())
        await self._write_status(d, st)
        return d

    async def _cleanup(self, d: Obj, olds: list[Obj]) -> None:
        """Old replicasets beyond revisionHistoryLimit, oldest revisions first, once empty."""
        limit = spec(d).get("revisionHistoryLimit")
        if not isinstance(limit, int):
            return
        alive = [rs for rs in olds if not metadata(rs).get("deletionTimestamp")]
        extra = len(alive) - limit
        if extra <= 0:
            return
        ordered = sorted(alive, key=lambda rs: (ro.revision(rs), str(metadata(rs).get("creationTimestamp") or "")))
        for rs in ordered[:extra]:
            m = metadata(rs)
            if ro.status_int(rs, "replicas") != 0 or ro.replicas_of(rs) != 0:
                continue
            if int(m.get("generation") or 0) > int(status(rs).get("observedGeneration") or 0):
                continue
            with contextlib.suppress(NotFoundError):
                await self.client.delete(
                    REPLICA_SETS.path(m.get("namespace"), m.get("name")), {"preconditions": {"uid": m.get("uid")}}
                )


def _replace_in(updated: Obj, new_rs: Obj | None, olds: list[Obj]) -> tuple[Obj | None, list[Obj]]:
    uid = metadata(updated).get("uid")
    if new_rs is not None and metadata(new_rs).get("uid") == uid:
        return updated, olds
    return new_rs, [updated if metadata(rs).get("uid") == uid else rs for rs in olds]
