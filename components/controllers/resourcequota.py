"""The resourcequota controller: each ResourceQuota's `status.hard` mirrors its spec and
`status.used` is recounted from what the namespace holds (admission's rules, see _infra_quota).

Pods, services, secrets and configmaps come from informers (a change enqueues the namespace's
quotas); other `count/<resource>.<group>` names are LISTed at each recount.  Every quota is
recounted again 5 minutes after its last recount (kube's full resync).  A status already right
is not written; a write that loses to admission's charge (Conflict) is retried."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.client.indexer import NAMESPACE_INDEX, key_of, split_key
from components.client.informer import EventHandler, SharedInformer
from components.client.listwatch import Resource
from components.controllers._infra_quota import hard_of, used, wanted
from components.controllers.base import Controller, Requeue
from machinery import objects
from machinery.objects import Obj
from machinery.quantity import QuantityError, canonical, parse_quantity
from machinery.resources import NAMESPACED, GroupResource

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


class ResourceQuotaController(Controller):
    name = "resourcequota"

    def setup(self) -> None:
        self.quotas = self.factory.informer(QUOTAS)
        self.quotas.add_handler(EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n)))
        self.watched: dict[GroupResource, SharedInformer] = {}
        for r in (QUOTAS, *WATCHED):
            informer = self.factory.informer(r)
            self.watched[GroupResource(r.group, r.plural)] = informer
            informer.add_handler(
                EventHandler(on_add=self._changed, on_update=lambda _o, n: self._changed(n), on_delete=self._changed)
            )

    def _changed(self, obj: Obj) -> None:
        namespace = objects.namespace(obj)
        for q in self.quotas.indexer.by_index(NAMESPACE_INDEX, namespace):
            self.queue.add(key_of(q))

    async def reconcile(self, key: str) -> None:
        namespace, _ = split_key(key)
        quota = self.quotas.indexer.get(key)
        if quota is None or namespace is None:
            return
        listed: dict[GroupResource, list[Obj]] = {}
        for gr in wanted([quota]):
            informer = self.watched.get(gr)
            if informer is not None:
                listed[gr] = informer.indexer.by_index(NAMESPACE_INDEX, namespace)
            else:
                r = NAMESPACED[gr]
                path = Resource(r.group, r.version, r.plural).path(namespace)
                listed[gr] = list((await self.client.get(path)).get("items") or [])
        want = {"hard": hard_of(quota), "used": used(quota, lambda gr: listed.get(gr, []))}
        status = quota.get("status") or {}
        held = {f: _canonical(status.get(f) or {}) for f in ("hard", "used")}
        if held != {f: _canonical(want[f]) for f in want}:
            body = {**quota, "status": {**status, **want}}
            await self.client.replace(QUOTAS.path(namespace, quota["metadata"]["name"], sub="status"), body)
        raise Requeue(RESYNC_S)
