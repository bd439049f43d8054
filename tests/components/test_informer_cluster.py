"""Informers against a real apiserver: the initial state (streamed with sendInitialEvents, or
listed), then every change, with indexes kept in step; one informer per resource per process."""

from __future__ import annotations

import asyncio

import pytest

from components.client import kubeconfig
from components.client.indexer import LABEL_INDEX, NAMESPACE_INDEX
from components.client.informer import EventHandler, InformerFactory
from components.client.listwatch import Resource
from components.client.rest import RestClient
from tests.apiserver.support import ApiserverUnderTest
from tests.support.wait import eventually

CONFIGMAPS = Resource("", "v1", "configmaps", kind="ConfigMap")


@pytest.mark.parametrize("watch_list", [True, False], ids=["sendInitialEvents", "list"])
def test_an_informer_follows_the_server(cluster: ApiserverUnderTest, watch_list: bool) -> None:
    ns = f"inf-{'wl' if watch_list else 'l'}"

    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            await client.create("/api/v1/namespaces", {"metadata": {"name": ns}})
            base = CONFIGMAPS.path(ns)
            await client.create(base, {"metadata": {"name": "before", "labels": {"app": "a"}}})
            factory = InformerFactory(client, use_watch_list=watch_list)
            informer = factory.informer(CONFIGMAPS)
            assert factory.informer(CONFIGMAPS) is informer  # shared
            seen: list[tuple[str, str]] = []
            informer.add_handler(
                EventHandler(
                    on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
                    on_update=lambda old, new: seen.append(("update", new["metadata"]["name"])),
                    on_delete=lambda o: seen.append(("delete", o["metadata"]["name"])),
                )
            )
            factory.start()
            try:
                assert await factory.wait_for_sync(timeout=20)
                assert informer.reflector.use_watch_list is watch_list  # the server streams initial events
                assert ("add", "before") in seen
                assert [o["metadata"]["name"] for o in informer.indexer.by_index(NAMESPACE_INDEX, ns)] == ["before"]
                await client.create(base, {"metadata": {"name": "after", "labels": {"app": "a"}}})
                await client.patch(f"{base}/before", {"data": {"k": "v"}})
                await client.delete(f"{base}/after")
                await eventually(lambda: ("delete", "after") in seen)
                assert ("add", "after") in seen and ("update", "before") in seen
                held = informer.indexer.get(f"{ns}/before")
                assert held is not None and held["data"] == {"k": "v"}
                assert [
                    o["metadata"]["name"]
                    for o in informer.indexer.by_index(LABEL_INDEX, "app=a")
                    if o["metadata"]["namespace"] == ns
                ] == ["before"]
                # a handler added late hears about what is held
                late: list[str] = []
                informer.add_handler(EventHandler(on_add=lambda o: late.append(o["metadata"]["name"])))
                assert "before" in late
            finally:
                await factory.stop()

    asyncio.run(go())
