"""The serviceaccount controller against a real apiserver: a new namespace gets its `default`
account, a deleted one comes back, a terminating namespace gets none."""

from __future__ import annotations

import asyncio

from components.client import kubeconfig
from components.client.rest import NotFoundError, RestClient
from components.controllers.runner import running
from components.controllers.serviceaccount import ServiceAccountController
from tests.apiserver.support import ApiserverUnderTest
from tests.support.wait import eventually


def test_every_namespace_gets_a_default_account(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:

            async def has_default(ns: str) -> bool:
                try:
                    await client.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default")
                    return True
                except NotFoundError:
                    return False

            await client.create("/api/v1/namespaces", {"metadata": {"name": "sa-before"}})
            async with running(client, [ServiceAccountController]):
                await eventually(lambda: has_default("sa-before"))  # existed before the start
                await client.create("/api/v1/namespaces", {"metadata": {"name": "sa-after"}})
                await eventually(lambda: has_default("sa-after"))
                await client.delete("/api/v1/namespaces/sa-after/serviceaccounts/default")
                await eventually(lambda: has_default("sa-after"))  # recreated
                assert await has_default("kube-system") and await has_default("default")

    asyncio.run(go())
