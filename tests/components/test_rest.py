"""The REST client against a real apiserver on a real store: answers decode, failures arrive
as the typed error of their Status reason, watches deliver events, and each component's
kubeconfig proves its identity (RBAC then decides)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from apiserver.pki import ApiserverPKI
from components.client import kubeconfig
from components.client.rest import (
    AlreadyExistsError,
    ConflictError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    RestClient,
    TransportError,
    UnauthorizedError,
    path_of,
)
from machinery.process.launch import free_ports
from tests.apiserver.support import ApiserverUnderTest

T = TypeVar("T")
CM = path_of("", "v1", "configmaps", "default")


def run(cluster: ApiserverUnderTest, body: Callable[[RestClient], Awaitable[T]], config: Path | None = None) -> T:
    async def go() -> T:
        async with RestClient(kubeconfig.load(config or cluster.kubeconfig)) as client:
            return await body(client)

    return asyncio.run(go())


def component(cluster: ApiserverUnderTest, name: str) -> Path:
    return ApiserverPKI.of(cluster.data_dir).kubeconfig_of(name)


def test_create_get_list_patch_delete(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient) -> None:
        made = await c.create(CM, {"metadata": {"name": "rest-a"}, "data": {"k": "v"}})
        assert made["metadata"]["name"] == "rest-a" and made["metadata"]["resourceVersion"]
        got = await c.get(f"{CM}/rest-a")
        assert got["data"] == {"k": "v"}
        listed = await c.get(CM, {"labelSelector": ""})
        assert "rest-a" in [i["metadata"]["name"] for i in listed["items"]]
        patched = await c.patch(f"{CM}/rest-a", {"data": {"k": "w"}})
        assert patched["data"] == {"k": "w"}
        await c.delete(f"{CM}/rest-a")
        with pytest.raises(NotFoundError) as e:
            await c.get(f"{CM}/rest-a")
        assert e.value.code == 404 and e.value.reason == "NotFound" and '"rest-a" not found' in e.value.message

    run(cluster, body)


def test_failures_are_typed_by_their_status_reason(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient) -> None:
        made = await c.create(CM, {"metadata": {"name": "rest-b"}})
        with pytest.raises(AlreadyExistsError):
            await c.create(CM, {"metadata": {"name": "rest-b"}})
        await c.replace(f"{CM}/rest-b", made | {"data": {"x": "1"}})
        with pytest.raises(ConflictError) as conflict:
            await c.replace(f"{CM}/rest-b", made | {"data": {"x": "2"}})  # the old resourceVersion
        assert conflict.value.code == 409
        with pytest.raises(InvalidError) as invalid:
            await c.create(CM, {"metadata": {"name": "Not_Valid"}})
        assert invalid.value.code == 422 and "metadata.name" in invalid.value.message

    run(cluster, body)


def test_a_component_identity_is_limited_by_rbac(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient) -> None:
        assert (await c.get("/api/v1/nodes"))["kind"] == "NodeList"  # the scheduler may list nodes
        with pytest.raises(ForbiddenError) as e:
            await c.get("/api/v1/namespaces/default/secrets")
        assert 'User "system:kube-scheduler" cannot list resource "secrets"' in e.value.message

    run(cluster, body, component(cluster, "scheduler"))


def test_a_wrong_token_is_unauthorized(cluster: ApiserverUnderTest, tmp_path: Path) -> None:
    real = kubeconfig.load(cluster.kubeconfig)
    bad = dataclasses.replace(real, token="not-a-token", cert_data=None, key_data=None)

    async def go() -> None:
        async with RestClient(bad) as c:
            with pytest.raises(UnauthorizedError) as e:
                await c.get("/api/v1/namespaces")
            assert e.value.code == 401

    asyncio.run(go())


def test_nothing_listening_is_a_transport_error() -> None:
    config = kubeconfig.ClientConfig(server=f"https://127.0.0.1:{free_ports(1)[0]}", insecure=True)

    async def go() -> None:
        async with RestClient(config, timeout=5) as c:
            with pytest.raises(TransportError, match="GET /api"):
                await c.get("/api")

    asyncio.run(go())


def test_watch_delivers_events_from_a_resource_version(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient) -> list[tuple[str, str]]:
        rv = (await c.get(CM))["metadata"]["resourceVersion"]
        await c.create(CM, {"metadata": {"name": "rest-w"}})
        await c.delete(f"{CM}/rest-w")
        seen: list[tuple[str, str]] = []
        params: dict[str, Any] = {"resourceVersion": rv, "allowWatchBookmarks": True, "timeoutSeconds": 5}
        async for event in c.watch(CM, params):
            if event.type != "BOOKMARK":
                seen.append((event.type, event.object["metadata"]["name"]))
            if len(seen) == 2:
                break
        return seen

    assert run(cluster, body) == [("ADDED", "rest-w"), ("DELETED", "rest-w")]
