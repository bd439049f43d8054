"""The resourcequota controller: each ResourceQuota's `status.hard` mirrors its spec and
`status.used` is recounted from what the namespace holds (admission's rules, see _infra_quota).

Pods, services, secrets and configmaps come from informers; other `count/<resource>.<group>`
names are LISTed at each recount (a custom resource at the version discovery prefers).  What
enqueues a recount is kube's: a quota whose spec.hard changed (or that has no status yet), and a
change that gives usage back (an object deleted, a pod finished, a service's type changed).  Not
a create, nor the quota's own status change: admission charged those, and a recount from an
informer that has not seen the new object yet would undercount and let the next creates past the
quota.  Every quota is recounted again 5 minutes after its last recount (kube's full resync).  A
status already right is not written; a write that loses to admission's charge (Conflict) is
retried."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from components.client.indexer import NAMESPACE_INDEX, key_of, split_key
from components.client.informer import EventHandler, SharedInformer
from components.client.listwatch import Resource
from components.client.rest import NotFoundError
from components.controllers._infra_quota import hard_of, used, wanted
from components.controllers.base import Controller, Requeue
from machinery import objects
from machinery.objects import Obj
from machinery.quantity import QuantityError, canonical, parse_quantity
from machinery.resources import NAMESPACED, BuiltIn, GroupResource

QUOTAS = Resource("", "v1", "resourcequotas", kind="ResourceQuota")
WATCHED = (
    Resource("", "v1", "pods", kind="Pod"),
    Resource("", "v1", "services", kind="Service"),
    Resource("", "v1", "secrets", kind="Secret"),
    Resource("", "v1", "configmaps", kind="ConfigMap"),
)
RESYNC_S = 300.0


def _canonical(values: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for k, v in values.items():
        try:
            out[str(k)] = canonical(parse_quantity(v))
        except (QuantityError, TypeError):
            out[str(k)] = str(v)
    return out


def _pod_finished(old: Obj, new: Obj) -> bool:
    """kube's replenishment of pods: one that finished no longer counts."""

    def done(pod: Obj) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    return done(new) and not done(old)


def _type_changed(old: Obj, new: Obj) -> bool:
    """A service's type decides whether it counts as a load balancer or a node port."""
    return (old.get("spec") or {}).get("type") != (new.get("spec") or {}).get("type")


def _never(old: Obj, new: Obj) -> bool:
    return False


class ResourceQuotaController(Controller):
    name = "resourcequota"

    def setup(self) -> None:
        self.quotas = self.factory.informer(QUOTAS)
        self.quotas.add_handler(EventHandler(on_add=self.enqueue, on_update=self._quota_updated))
        self.watched: dict[GroupResource, SharedInformer] = {}
        for r in (QUOTAS, *WATCHED):
            informer = self.factory.informer(r)
            self.watched[GroupResource(r.group, r.plural)] = informer
            gives_back = {"pods": _pod_finished, "services": _type_changed}.get(r.plural, _never)
            informer.add_handler(EventHandler(on_update=self._when(gives_back), on_delete=self._changed))

    def _when(self, gives_back: Callable[[Obj, Obj], bool]) -> Callable[[Obj, Obj], None]:
        """An update handler that recounts when the update `gives_back` usage."""

        def updated(old: Obj, new: Obj) -> None:
            if gives_back(old, new):
                self._changed(new)

        return updated

    def _quota_updated(self, old: Obj, new: Obj) -> None:
        """A new limit is recounted; a status write (admission's charge, ours) is not."""
        if (old.get("spec") or {}).get("hard") != (new.get("spec") or {}).get("hard") or not new.get("status"):
            self.enqueue(new)

    def _changed(self, obj: Obj) -> None:
        namespace = objects.namespace(obj)
        for q in self.quotas.indexer.by_index(NAMESPACE_INDEX, namespace):
            self.queue.add(key_of(q))

    async def _discover(self, gr: GroupResource) -> BuiltIn | None:
        """A custom resource's preferred version, from discovery (None when not served, or not
        namespaced: quota counts only what lives in a namespace)."""
        try:
            group = await self.client.get(f"/apis/{gr.group}")
            version = str((group.get("preferredVersion") or {}).get("groupVersion") or "")
            if not version:
                return None
            found = await self.client.get(f"/apis/{version}")
        except NotFoundError:
            return None
        for r in found.get("resources") or ():
            if isinstance(r, dict) and r.get("name") == gr.plural and r.get("namespaced") is True:
                return BuiltIn(gr.group, version.partition("/")[2], gr.plural, str(r.get("kind") or ""), True)
        return None

    async def reconcile(self, key: str) -> None:
        namespace, _ = split_key(key)
        quota = self.quotas.indexer.get(key)
        if quota is None or namespace is None:
            return
        listed: dict[GroupResource, list[Obj]] = {}
        served = dict(NAMESPACED)
        for gr in wanted([quota]):
            informer = self.watched.get(gr)
            if informer is not None:
                listed[gr] = informer.indexer.by_index(NAMESPACE_INDEX, namespace)
                continue
            r = NAMESPACED.get(gr) or await self._discover(gr)
            if r is None:
                continue  # not served (yet): used 0
            served[gr] = r
            path = Resource(r.group, r.version, r.plural).path(namespace)
            try:
                listed[gr] = list((await self.client.get(path)).get("items") or [])
            except NotFoundError:
                continue  # its CRD went away meanwhile
        want = {"hard": hard_of(quota), "used": used(quota, lambda gr: listed.get(gr, []), served)}
        status = quota.get("status") or {}
        held = {f: _canonical(status.get(f) or {}) for f in ("hard", "used")}
        if held != {f: _canonical(want[f]) for f in want}:
            body = {**quota, "status": {**status, **want}}
            await self.client.replace(QUOTAS.path(namespace, quota["metadata"]["name"], sub="status"), body)
        raise Requeue(RESYNC_S)
