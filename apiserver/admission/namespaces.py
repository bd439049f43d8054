"""How admission plugins read a namespace: the watch cache first, then storage when the cache
does not have it (a namespace created a moment ago may not have reached the cache yet; kube's
plugins make the same live lookup)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from apiserver import errors
from machinery.objects import Obj

NamespaceGetter = Callable[[str], Awaitable[Obj | None]]


class ObjectCache(Protocol):
    def get_object(self, namespace: str | None, name: str) -> Obj | None: ...


class NamespaceReader(Protocol):
    async def get(self, namespace: str | None, name: str) -> Obj: ...


def namespace_getter(cache: ObjectCache | None, registry: NamespaceReader | None) -> NamespaceGetter:
    async def get(name: str) -> Obj | None:
        found = cache.get_object(None, name) if cache is not None else None
        if found is not None:
            return found
        return await live(registry, name)

    return get


async def live(registry: NamespaceReader | None, name: str) -> Obj | None:
    """The cluster-scoped object (a namespace, a PriorityClass) as stored now, or None."""
    if registry is None:
        return None
    try:
        return await registry.get(None, name)
    except errors.StatusError as e:
        if e.code == 404:
            return None
        raise
