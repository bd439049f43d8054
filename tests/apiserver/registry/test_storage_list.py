"""Paged LISTs read straight from storage (backends without trustworthy progress notifications):
their continue tokens expire with the storage's compaction, as the watch cache's do."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

import pytest

from apiserver.errors import StatusError
from apiserver.objects import from_storage
from apiserver.registry.storage_list import list_from_storage
from apiserver.resources.base import object_fields
from apiserver.watchcache import CacheList, continuation
from tests.apiserver.memstorage import MemStorage
from tests.apiserver.watchcache.cache_support import PODS, enc, key, pod


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


async def page(store: MemStorage, limit: int, token: str = "") -> CacheList:
    return await list_from_storage(
        store,
        PODS,
        from_storage,
        functools.partial(object_fields, PODS),
        namespace=None,
        labels=None,
        fields=None,
        limit=limit,
        continue_token=token,
    )


def test_a_continue_token_the_storage_compacted_is_410_with_a_token_at_the_latest_revision() -> None:
    async def t() -> None:
        store = MemStorage()
        for n in "abcde":
            await store.create(key(n), enc(pod(n)))
        first = await page(store, 2)
        assert [o["metadata"]["name"] for o in first.items] == ["a", "b"]
        await store.delete(key("c"))
        await store.compact(store.revision)
        with pytest.raises(StatusError) as err:
            await page(store, 2, first.continue_token)
        assert err.value.code == 410 and err.value.reason == "Expired"
        go_on = err.value.to_status()["metadata"]["continue"]
        assert continuation.decode(go_on).revision == continuation.LATEST
        rest = await page(store, 2, go_on)
        assert [o["metadata"]["name"] for o in rest.items] == ["d", "e"]
        assert rest.resource_version == store.revision

    run(t)
