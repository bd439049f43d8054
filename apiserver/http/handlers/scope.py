"""What every resource handler reaches: the registries and watch caches built from the
resource definitions, the storage, the clock, the in-flight limits, and the services that
some subresources need (the kubelets, token signing, the answerers of reviews).

One object built once per server, so that handlers are plain functions of it and a resource
defined at run time gets its registry and cache through the same constructor.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from apiserver import errors
from apiserver.admission.interface import AdmissionChain
from apiserver.auth.token_request import TokenRequests
from apiserver.http import patching
from apiserver.http.inflight import InFlight
from apiserver.http.kubelet_proxy import NodeAccess
from apiserver.http.pod_proxy import PodProxyClient
from apiserver.registry.generic import Registry
from apiserver.resources.base import ResourceDef, object_fields
from apiserver.storage.interface import Storage
from apiserver.watchcache import Cacher

# (the requesting user, the URL's namespace, the posted object) -> the answer (or an awaitable of it)
VirtualHandler = Callable[[Any, str | None, dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]]
# (namespace or None for all, name or None for a list) -> the objects computed now
ComputedReader = Callable[[str | None, str | None], list[dict[str, Any]]]


class ResourceScope:
    def __init__(
        self,
        storage: Storage,
        resources: tuple[ResourceDef, ...],
        clock: Callable[[], float],
        watch_cache_capacity: int = 10_000,
    ) -> None:
        self.clock = clock
        self.storage = storage
        self.inflight = InFlight()
        self.by_path: dict[tuple[str, str, str], ResourceDef] = {}
        self.registries: dict[ResourceDef, Registry] = {}
        # One cache per resource (events.k8s.io and core events share storage, not their shape).
        self.caches: dict[ResourceDef, Cacher] = {}
        # the answers of resources that are not stored (access reviews...), by `ResourceDef.virtual`
        self.virtual: dict[str, VirtualHandler] = {}
        # the readers of resources computed on request (metrics.k8s.io), by `ResourceDef.computed`
        self.computed: dict[str, ComputedReader] = {}
        # serviceaccounts/token (set by the app, which owns the signing key)
        self.token_requests: TokenRequests | None = None
        self.node_access: NodeAccess | None = None  # pods/log, exec, portforward, nodes/proxy
        self.pod_proxy: PodProxyClient | None = None  # pods/proxy
        self._capacity = watch_cache_capacity
        self._admission: AdmissionChain | None = None
        # bumped whenever the served resources change (a CRD served or withdrawn): what is built
        # from them (OpenAPI documents, webhook matching) rebuilds when it sees a new value
        self.generation = 0
        self._served_versions: tuple[int, frozenset[tuple[str, str]]] | None = None
        for res in resources:
            self._add(res)
        # readiness waits for the built-in kinds' caches only: a custom kind's cache starting
        # while the server runs does not make the server unready
        self._builtin = tuple(self.caches.values())

    def _add(self, res: ResourceDef) -> None:
        self.by_path[(res.group, res.version, res.plural)] = res
        if res.virtual or res.computed:
            return
        registry = Registry(res, self.storage, clock=self.clock, track_fields=patching.track_fields)
        if self._admission is not None:
            registry.admission = self._admission
        self.registries[res] = registry
        self.caches[res] = Cacher(
            self.storage, res, capacity=self._capacity, fields_of=functools.partial(object_fields, res)
        )

    def resources(self) -> tuple[ResourceDef, ...]:
        """What is served now, built-in kinds first, then custom ones in the order they came."""
        return tuple(self.by_path.values())

    def serves(self, group: str, version: str) -> bool:
        """Whether some resource of `group/version` is served here (not by an aggregated server)."""
        served = self._served_versions
        if served is None or served[0] != self.generation:
            served = self._served_versions = (self.generation, frozenset((g, v) for g, v, _ in self.by_path))
        return (group, version) in served[1]

    async def serve(self, res: ResourceDef) -> None:
        """Serve a resource defined at run time (a CRD's version), replacing what served its path."""
        old = self.by_path.get((res.group, res.version, res.plural))
        if old is not None:
            await self.withdraw(old)
        self._add(res)
        self.generation += 1
        await self.caches[res].start()

    async def withdraw(self, res: ResourceDef) -> None:
        """Stop serving `res`: its path answers 404 from now on, its cache stops."""
        if self.by_path.get((res.group, res.version, res.plural)) is res:
            del self.by_path[(res.group, res.version, res.plural)]
        self.registries.pop(res, None)
        cache = self.caches.pop(res, None)
        self.generation += 1
        if cache is not None:
            await cache.stop()

    def use_admission(self, chain: AdmissionChain) -> None:
        """Every write from now on passes `chain` (built once the caches it reads exist)."""
        self._admission = chain
        for registry in self.registries.values():
            registry.admission = chain

    async def start(self) -> None:
        await asyncio.gather(*(c.start() for c in self.caches.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.caches.values()), return_exceptions=True)

    def ready(self) -> bool:
        return all(c.ready for c in self._builtin)

    def kubelets(self) -> NodeAccess:
        """The way to kubelets; 503 on a server built without one."""
        if self.node_access is None:
            raise errors.unavailable("this apiserver does not reach kubelets")
        return self.node_access
