"""The endpointslicemirroring controller: the Endpoints of a Service without a selector (written
by a user or an outside controller) are mirrored into EndpointSlices managed by
`endpointslicemirroring-controller.k8s.io` and owned by the Endpoints, so whatever reads slices
sees them.  The slices go when the Endpoints or the Service goes, when the Service gains a
selector, or when the Endpoints is labelled `endpointslice.kubernetes.io/skip-mirror: "true"`.
What to write is `_slice_mirroring.plan`; this file is the informers, the writes, and events
(Warning `InvalidIPAddress`, `TooManyAddressesToMirror` on the Endpoints) for what was left out.

Keys are `namespace/name`, the Service's and its Endpoints' alike.  A reconcile waits (briefly)
until its informer shows the slices it last wrote, as kube's slice tracker has it: acting on a
cache behind its own create would create the slice twice."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from components.client.events import WARNING, EventRecorder, reference
from components.client.indexer import LABEL_INDEX, split_key
from components.client.informer import EventHandler, InformerFactory
from components.client.listwatch import Resource
from components.client.rest import NotFoundError, RestClient
from components.controllers import _slice_mirroring as m
from components.controllers._infra_endpoints import SERVICE_NAME_LABEL
from components.controllers.base import Controller, Requeue
from machinery import objects
from machinery.clock import Clock
from machinery.objects import Obj

ENDPOINTS = Resource("", "v1", "endpoints", kind="Endpoints")
SERVICES = Resource("", "v1", "services", kind="Service")
SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", kind="EndpointSlice")
UNSEEN_WAIT_S = 0.2  # recheck after this while the informer lags our own writes
UNSEEN_GIVE_UP_S = 10.0  # then trust the informer (an event may have been lost)


def _not_older(seen: str, wrote: str) -> bool:
    try:
        return int(seen) >= int(wrote)
    except ValueError:
        return seen == wrote


@dataclass
class _Written:
    """Slices one reconcile wrote: name -> resourceVersion written ("" for deleted)."""

    at: float
    slices: dict[str, str] = field(default_factory=dict)


class EndpointSliceMirroringController(Controller):
    name = "endpointslicemirroring"

    def __init__(
        self,
        client: RestClient,
        factory: InformerFactory,
        *,
        clock: Clock | None = None,
        max_endpoints_per_subset: int = m.MAX_ENDPOINTS_PER_SUBSET,
    ) -> None:
        self.max_endpoints_per_subset = max_endpoints_per_subset
        self._written: dict[str, _Written] = {}
        super().__init__(client, factory, clock=clock)
        self.events = EventRecorder(client, "endpoint-slice-mirroring-controller", "")

    def setup(self) -> None:
        self.endpoints = self.factory.informer(ENDPOINTS)
        self.services = self.factory.informer(SERVICES)
        self.slices = self.factory.informer(SLICES)
        self.endpoints.add_handler(
            EventHandler(
                on_add=self._endpoints_changed,
                on_update=lambda o, n: self._endpoints_changed(n, o),
                on_delete=self._endpoints_changed,
            )
        )
        self.services.add_handler(
            EventHandler(
                on_add=self._service_changed,
                on_update=lambda o, n: self._service_changed(n, o),
                on_delete=self._service_changed,
            )
        )
        self.slices.add_handler(
            EventHandler(
                on_add=self._slice_changed,
                on_update=self._slice_moved,
                on_delete=self._slice_gone,
            )
        )

    def _endpoints_changed(self, endpoints: Obj, old: Obj | None = None) -> None:
        if m.should_mirror(endpoints) or m.should_mirror(old):
            self.enqueue(endpoints)

    def _service_changed(self, service: Obj, old: Obj | None = None) -> None:
        # only a selectorless service is mirrored, so only gaining or losing a selector matters
        if m.has_selector(service) != (m.has_selector(old) if old is not None else True):
            self.enqueue(service)

    def _slice_changed(self, piece: Obj) -> None:
        service = objects.labels(piece).get(SERVICE_NAME_LABEL)
        if m.mirrored(piece) and isinstance(service, str) and service:
            self.queue.add(f"{objects.namespace(piece)}/{service}")

    def _slice_gone(self, piece: Obj) -> None:
        # a slice we wrote and someone else deleted is seen, though the informer no longer holds it
        service = objects.labels(piece).get(SERVICE_NAME_LABEL)
        written = self._written.get(f"{objects.namespace(piece)}/{service}")
        if written is not None:
            written.slices.pop(objects.name(piece), None)
        self._slice_changed(piece)

    def _slice_moved(self, old: Obj, new: Obj) -> None:
        # a slice relabelled to another service (or away from us) concerns both keys
        self._slice_changed(new)
        self._slice_changed(old)

    def mirrored_slices(self, namespace: str, name: str) -> list[Obj]:
        return [
            s
            for s in self.slices.indexer.by_index(LABEL_INDEX, f"{SERVICE_NAME_LABEL}={name}")
            if objects.namespace(s) == namespace and m.mirrored(s)
        ]

    def _caught_up(self, key: str, namespace: str) -> bool:
        """Whether the informer shows the slices this key's last reconcile wrote."""
        written = self._written.get(key)
        if written is None:
            return True
        if self.clock.now() - written.at > UNSEEN_GIVE_UP_S:
            del self._written[key]
            return True
        for name, rv in written.slices.items():
            seen = self.slices.indexer.get(f"{namespace}/{name}")
            if (seen is None) != (rv == "") or (
                seen is not None and not _not_older(objects.resource_version(seen), rv)
            ):
                return False
        del self._written[key]
        return True

    async def reconcile(self, key: str) -> None:
        namespace, name = split_key(key)
        if namespace is None:
            return
        if not self._caught_up(key, namespace):
            raise Requeue(UNSEEN_WAIT_S)
        endpoints = self.endpoints.indexer.get(key)
        plan = m.plan(
            self.services.indexer.get(key),
            endpoints,
            self.mirrored_slices(namespace, name),
            self.max_endpoints_per_subset,
        )
        if endpoints is not None and plan.invalid:
            self.events.record(
                reference(endpoints, "v1", "Endpoints"),
                WARNING,
                "InvalidIPAddress",
                f"Skipped {plan.invalid} invalid IP addresses when mirroring to EndpointSlices",
            )
        if endpoints is not None and plan.over_limit > 0:
            self.events.record(
                reference(endpoints, "v1", "Endpoints"),
                WARNING,
                "TooManyAddressesToMirror",
                f"A max of {self.max_endpoints_per_subset} addresses can be mirrored to EndpointSlices per "
                f"Endpoints subset. {plan.skipped} addresses were skipped",
            )
        written = _Written(at=self.clock.now())
        try:
            for body in plan.create:
                made = await self.client.create(SLICES.path(namespace), body)
                written.slices[objects.name(made)] = objects.resource_version(made)
            for body in plan.update:
                made = await self.client.replace(SLICES.path(namespace, objects.name(body)), body)
                written.slices[objects.name(made)] = objects.resource_version(made)
            for held in plan.delete:
                with contextlib.suppress(NotFoundError):
                    await self.client.delete(SLICES.path(namespace, objects.name(held)))
                written.slices[objects.name(held)] = ""
        finally:
            if written.slices:
                self._written[key] = written
