"""Helpers for the per-kind tests: one resource's Registry over in-memory storage (create, get and
list as the HTTP layer calls them), its validation causes as kubectl prints them, its Table."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from apiserver.errors import StatusError
from apiserver.registry.generic import Registry
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef
from apiserver.table import table
from machinery.objects import Obj
from tests.apiserver.memstorage import MemStorage

T = TypeVar("T")
NOW = 1_700_000_000.0


def find(group: str, plural: str, version: str | None = None) -> ResourceDef:
    return next(
        r for r in catalog() if r.group == group and r.plural == plural and (version is None or r.version == version)
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def registry(resource: ResourceDef, storage: MemStorage | None = None) -> Registry:
    return Registry(resource, storage or MemStorage(), clock=lambda: NOW)


def create(resource: ResourceDef, obj: Obj, namespace: str | None = "default") -> Obj:
    """Create through the Registry, read it back and list it: the stored object as clients see it."""
    reg = registry(resource)

    async def go() -> Obj:
        created = await reg.create(namespace if resource.namespaced else None, copy.deepcopy(obj))
        name = created["metadata"]["name"]
        got = await reg.get(namespace if resource.namespaced else None, name)
        listed = await reg.list_all(namespace if resource.namespaced else None)
        assert [o["metadata"]["name"] for o in listed] == [name]
        assert got == listed[0]
        return got

    return run(go())


def rejected(resource: ResourceDef, obj: Obj, namespace: str | None = "default") -> list[str]:
    """A create that must fail with 422: the causes as `field: message`."""
    with pytest.raises(StatusError) as err:
        run(registry(resource).create(namespace if resource.namespaced else None, copy.deepcopy(obj)))
    assert err.value.code == 422, err.value
    return [f"{c['field']}: {c['message']}" for c in err.value.details["causes"]]


def causes(resource: ResourceDef, obj: Obj, old: Obj | None = None) -> list[str]:
    obj = copy.deepcopy(obj)
    resource.default(obj)
    return [f"{c.field}: {c.message}" for c in resource.validate(obj, old)]


def headers(resource: ResourceDef) -> list[tuple[str, int]]:
    return [(c["name"], c["priority"]) for c in table(resource, [], now=NOW)["columnDefinitions"]]


def cells(resource: ResourceDef, obj: Obj) -> list[Any]:
    return list(table(resource, [obj], now=NOW)["rows"][0]["cells"])
