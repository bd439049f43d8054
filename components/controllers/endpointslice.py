"""The endpointslice controller: a Service with a selector has EndpointSlices
(discovery.k8s.io/v1, labelled `kubernetes.io/service-name` and managed by
`endpointslice-controller.k8s.io`, owned by the service) holding its pods' endpoints with the
conditions ready/serving/terminating, at most 100 per slice, one slice per distinct resolved
port set.  Existing slices are reused (updated in place) before new ones are made; leftovers are
deleted; a slice already as wanted is not written."""

from __future__ import annotations

import contextlib
from typing import Any

from components.client.indexer import LABEL_INDEX, split_key
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import NotFoundError
from components.controllers._infra_endpoints import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
    address_type,
    desired_slices,
    managed_labels,
    selector_of,
)
from components.controllers._infra_svcpods import ServicePodsController
from machinery import objects
from machinery.objects import Obj

SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", kind="EndpointSlice")


def _same(held: Obj, want: Obj) -> bool:
    return (
        all((held.get(f) or []) == (want.get(f) or []) for f in ("endpoints", "ports"))
        and held.get("addressType") == want.get("addressType")
        and objects.labels(held) == want["metadata"]["labels"]
    )


class EndpointSliceController(ServicePodsController):
    name = "endpointslice"

    def setup(self) -> None:
        super().setup()
        self.slices = self.factory.informer(SLICES)
        self.slices.add_handler(
            EventHandler(on_update=lambda _o, n: self._slice_changed(n), on_delete=self._slice_changed)
        )

    def _slice_changed(self, piece: Obj) -> None:
        meta = piece.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(MANAGED_BY_LABEL) == MANAGED_BY and labels.get(SERVICE_NAME_LABEL):
            self.queue.add(f"{meta.get('namespace')}/{labels[SERVICE_NAME_LABEL]}")

    def owned(self, namespace: str, name: str) -> list[Obj]:
        return [
            s
            for s in self.slices.indexer.by_index(LABEL_INDEX, f"{SERVICE_NAME_LABEL}={name}")
            if (s.get("metadata") or {}).get("namespace") == namespace
            and objects.labels(s).get(MANAGED_BY_LABEL) == MANAGED_BY
        ]

    async def reconcile(self, key: str) -> None:
        namespace, name = split_key(key)
        if namespace is None:
            return
        service = self.services.indexer.get(key)
        existing = self.owned(namespace, name)
        if service is None:
            for s in existing:
                await self._delete(s)
            return
        if not selector_of(service):
            return
        want = [self._slice(service, ports, eps) for ports, eps in desired_slices(service, self.selected_pods(service))]
        pool = list(existing)
        todo = []
        for w in want:
            same = next((s for s in pool if _same(s, w)), None)
            if same is not None:
                pool.remove(same)
            else:
                todo.append(w)
        for w in todo:
            if pool:
                held = pool.pop(0)
                meta = {**held["metadata"], "labels": w["metadata"]["labels"]}
                meta["ownerReferences"] = w["metadata"]["ownerReferences"]
                body = {**held, **{k: v for k, v in w.items() if k != "metadata"}, "metadata": meta}
                await self.client.replace(SLICES.path(namespace, meta["name"]), body)
            else:
                await self.client.create(SLICES.path(namespace), w)
        for s in pool:
            await self._delete(s)

    async def _delete(self, piece: Obj) -> None:
        meta = piece.get("metadata") or {}
        with contextlib.suppress(NotFoundError):
            await self.client.delete(SLICES.path(meta.get("namespace"), meta.get("name")))

    @staticmethod
    def _slice(service: Obj, ports: list[Obj], endpoints: list[Obj]) -> Obj:
        meta = service["metadata"]
        labels = managed_labels(service) | {SERVICE_NAME_LABEL: meta["name"], MANAGED_BY_LABEL: MANAGED_BY}
        owner: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Service",
            "name": meta["name"],
            "uid": meta.get("uid", ""),
            "controller": True,
            "blockOwnerDeletion": True,
        }
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"generateName": f"{meta['name']}-", "labels": labels, "ownerReferences": [owner]},
            "addressType": address_type(service),
            "endpoints": endpoints,
            # a slice port always has a name ("" for an unnamed service port), as kube's controller
            # writes it: kubectl describe service dereferences it (a nil name made it panic)
            "ports": [{**p, "name": p.get("name", "")} for p in ports],
        }
