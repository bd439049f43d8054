"""The endpoints controller: a Service with a selector has an Endpoints object of its name whose
subsets list its pods' IPs (ready ones in `addresses`, the others in `notReadyAddresses`) with
the service's ports resolved per pod.  Services without a selector are left alone (their
Endpoints are the user's); a deleted service's Endpoints are deleted.  Writes only changes.

As kube's, Endpoints are looked at when a Service or pod changes, when one is deleted (it is made
again if its Service wants it), and once at start (leftovers of Services deleted meanwhile go,
but for leader-election records); an Endpoints object a user writes without a Service is
otherwise theirs."""

from __future__ import annotations

import contextlib

from components.client.indexer import split_key
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import AlreadyExistsError, NotFoundError
from components.controllers._infra_endpoints import endpoints_subsets, managed_labels, selector_of
from components.controllers._infra_svcpods import ServicePodsController
from machinery.objects import Obj

ENDPOINTS = Resource("", "v1", "endpoints", kind="Endpoints")
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"  # an old leader-election record


class EndpointsController(ServicePodsController):
    name = "endpoints"

    def setup(self) -> None:
        super().setup()
        self.endpoints = self.factory.informer(ENDPOINTS)
        self.endpoints.add_handler(EventHandler(on_delete=self.enqueue))

    async def run(self, workers: int | None = None) -> None:
        for held in self.endpoints.indexer.objects():  # kube's checkLeftoverEndpoints
            if LEADER_ANNOTATION not in ((held.get("metadata") or {}).get("annotations") or {}):
                self.enqueue(held)
        await super().run(workers)

    async def reconcile(self, key: str) -> None:
        namespace, name = split_key(key)
        if namespace is None:
            return
        service = self.services.indexer.get(key)
        held = self.endpoints.indexer.get(key)
        if service is None:
            if held is not None:
                with contextlib.suppress(NotFoundError):
                    await self.client.delete(ENDPOINTS.path(namespace, name))
            return
        if not selector_of(service):
            return
        subsets = endpoints_subsets(service, self.selected_pods(service))
        labels = managed_labels(service)
        if held is None:
            body: Obj = {"metadata": {"name": name, "labels": labels}, "subsets": subsets}
            try:
                await self.client.create(ENDPOINTS.path(namespace), body)
            except AlreadyExistsError:
                fresh = await self.client.get(ENDPOINTS.path(namespace, name))
                await self._update(fresh, labels, subsets)
            return
        await self._update(held, labels, subsets)

    async def _update(self, held: Obj, labels: dict[str, str], subsets: list[Obj]) -> None:
        meta = held.get("metadata") or {}
        if (held.get("subsets") or []) == subsets and (meta.get("labels") or {}) == labels:
            return
        body = {**held, "metadata": {**meta, "labels": labels}, "subsets": subsets}
        if not subsets:
            body.pop("subsets")
        await self.client.replace(ENDPOINTS.path(meta.get("namespace"), meta.get("name")), body)
