"""The root-ca-cert-publisher against a real apiserver: every namespace gets `kube-root-ca.crt`
with the cluster CA, a deleted or edited one is put back, a terminating namespace gets none,
and a CA given explicitly (--root-ca-file) is the one published."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

from apiserver.pki import ApiserverPKI
from components.client import kubeconfig
from components.client.rest import NotFoundError, RestClient
from components.controllers.rootcacertpublisher import DESCRIPTION, DESCRIPTION_ANNOTATION, RootCACertPublisher
from components.controllers.runner import running
from machinery.process import pki
from tests.apiserver.support import ApiserverUnderTest
from tests.support.wait import eventually

PATH = "/api/v1/namespaces/{}/configmaps/kube-root-ca.crt"


async def published(client: RestClient, ns: str) -> dict[str, Any] | None:
    try:
        return await client.get(PATH.format(ns))
    except NotFoundError:
        return None


async def present(client: RestClient, ns: str) -> bool:
    return await published(client, ns) is not None


def test_every_namespace_gets_the_cluster_ca(cluster: ApiserverUnderTest) -> None:
    ca = ApiserverPKI.of(cluster.data_dir).ca.read_text()

    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:

            async def has_ca(ns: str) -> bool:
                cm = await published(client, ns)
                return cm is not None and cm.get("data") == {"ca.crt": ca}

            await client.create("/api/v1/namespaces", {"metadata": {"name": "rootca-before"}})
            async with running(client, [RootCACertPublisher]):
                for ns in ("rootca-before", "default", "kube-system"):  # existed before the start
                    await eventually(lambda ns=ns: has_ca(ns))
                cm = await published(client, "default")
                assert cm is not None and cm["metadata"]["annotations"][DESCRIPTION_ANNOTATION] == DESCRIPTION

                await client.create("/api/v1/namespaces", {"metadata": {"name": "rootca-after"}})
                await eventually(lambda: has_ca("rootca-after"))

                await client.delete(PATH.format("rootca-after"))
                await eventually(lambda: has_ca("rootca-after"))  # re-created

                edited = await published(client, "rootca-before")
                assert edited is not None
                edited["data"] = {"ca.crt": "not a CA", "extra": "x"}
                await client.replace(PATH.format("rootca-before"), edited)
                await eventually(lambda: has_ca("rootca-before"))  # corrected, the extra key gone

    asyncio.run(go())


def test_terminating_namespace_gets_none(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client, running(client, [RootCACertPublisher]):
            await client.create("/api/v1/namespaces", {"metadata": {"name": "rootca-going"}})
            await eventually(lambda: present(client, "rootca-going"))
            # no namespace controller runs here: the namespace stays Terminating
            await client.delete("/api/v1/namespaces/rootca-going")
            await client.delete(PATH.format("rootca-going"))
            await client.create("/api/v1/namespaces", {"metadata": {"name": "rootca-later"}})
            await eventually(lambda: present(client, "rootca-later"))  # the controller has moved on
            await asyncio.sleep(0.5)
            assert await published(client, "rootca-going") is None

    asyncio.run(go())


def test_an_explicit_ca_is_published(cluster: ApiserverUnderTest, tmp_path: Path) -> None:
    pem = pki.create_ca(tmp_path, "another CA").cert.read_text()  # not the CA the client trusts

    async def go() -> None:
        explicit = functools.partial(RootCACertPublisher, root_ca=pem.encode())
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client, running(client, [explicit]):
            await client.create("/api/v1/namespaces", {"metadata": {"name": "rootca-explicit"}})

            async def has_it() -> bool:
                cm = await published(client, "rootca-explicit")
                return cm is not None and cm.get("data") == {"ca.crt": pem}

            await eventually(has_it)

    asyncio.run(go())
