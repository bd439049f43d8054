"""A CRD whose versions convert through its conversion webhook: a real HTTPS webhook (its own
CA) converting v1's `hostPort: "h:p"` to v2's `host` and `port`, an in-process apiserver.

Reads of either version (get, list, watch through the cache, field selectors on v2's
fields), writes in v2 stored in v1, and a webhook that answers badly or not at all: a 500
naming the webhook, never a wrong object."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
from aiohttp import web

from apiserver.http.app import build_app
from tests.apiserver.crd.test_crd_serving import CRDS, Admin, established, serve
from tests.apiserver.memstorage import MemStorage
from tests.apiserver.webhook_support import make_tls

GROUP = "net.example.com"
V1 = f"/apis/{GROUP}/v1/namespaces/default/endpoints"
V2 = f"/apis/{GROUP}/v2/namespaces/default/endpoints"


def to_v2(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    host, _, port = str(out.pop("hostPort", "")).partition(":")
    return {**out, "apiVersion": f"{GROUP}/v2", "host": host, "port": port}


def to_v1(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    host, port = out.pop("host", ""), out.pop("port", "")
    return {**out, "apiVersion": f"{GROUP}/v1", "hostPort": f"{host}:{port}"}


class Converter:
    def __init__(self) -> None:
        self.calls = 0
        self.broken = False
        self.stalled = False  # answer only after the apiserver's deadline

    async def handle(self, request: web.Request) -> web.Response:
        self.calls += 1
        review = orjson.loads(await request.read())
        req = review["request"]
        if self.stalled:
            await asyncio.sleep(5)
        if self.broken:
            result = {"status": "Failure", "message": "converter is down for maintenance"}
            return web.json_response({**review, "response": {"uid": req["uid"], "result": result}})
        convert = to_v2 if req["desiredAPIVersion"].endswith("/v2") else to_v1
        converted = [convert(o) for o in req["objects"]]
        answer = {"uid": req["uid"], "result": {"status": "Success"}, "convertedObjects": converted}
        return web.json_response({**review, "response": answer})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def webhook(tmp: Path, converter: Converter) -> AsyncIterator[tuple[str, str]]:
    tls = make_tls(tmp)
    app = web.Application()
    app.router.add_post("/convert", converter.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls.server)
    await site.start()
    try:
        yield f"https://127.0.0.1:{port}/convert", tls.ca_bundle
    finally:
        await runner.cleanup()


def crd(url: str, ca: str) -> dict[str, Any]:
    def version(name: str, storage: bool, props: dict[str, Any], selectable: list[str]) -> dict[str, Any]:
        schema = {"type": "object", "properties": props}
        return {
            "name": name,
            "served": True,
            "storage": storage,
            "schema": {"openAPIV3Schema": schema},
            "selectableFields": [{"jsonPath": f".{f}"} for f in selectable],
        }

    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"endpoints.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "endpoints", "singular": "endpoint", "kind": "Endpoint"},
            "versions": [
                version("v1", True, {"hostPort": {"type": "string"}}, ["hostPort"]),
                version("v2", False, {"host": {"type": "string"}, "port": {"type": "string"}}, ["host", "port"]),
            ],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": url, "caBundle": ca}},
            },
        },
    }


def test_versions_convert_through_the_webhook(tmp_path: Path) -> None:
    converter = Converter()

    async def exercise(client: httpx.AsyncClient) -> None:
        async with webhook(tmp_path, converter) as (url, ca):
            assert (await client.post(CRDS, json=crd(url, ca))).status_code == 201
            await established(client, f"endpoints.{GROUP}")
            made = await client.post(V1, json={"metadata": {"name": "a"}, "hostPort": "h1:80"})
            assert made.status_code == 201, made.text

            got = (await client.get(f"{V2}/a")).json()
            assert (got["apiVersion"], got["host"], got["port"]) == (f"{GROUP}/v2", "h1", "80"), got
            assert "hostPort" not in got and got["metadata"]["uid"] == made.json()["metadata"]["uid"]

            written = await client.post(V2, json={"metadata": {"name": "b"}, "host": "h2", "port": "8080"})
            assert written.status_code == 201, written.text
            assert written.json()["host"] == "h2" and written.json()["apiVersion"] == f"{GROUP}/v2"
            storage = client._transport.app.api.storage  # type: ignore[attr-defined]
            stored = await storage.get(f"/registry/{GROUP}/endpoints/default/b")
            assert orjson.loads(stored.value)["hostPort"] == "h2:8080"  # kept in the storage version

            async def listed(url: str) -> list[str]:
                return sorted(i["metadata"]["name"] for i in (await client.get(url)).json()["items"])

            for _ in range(100):  # the v2 cache converts as it follows the store
                if await listed(f"{V2}?fieldSelector=host=h2") == ["b"]:
                    break
                await asyncio.sleep(0.05)
            assert await listed(f"{V2}?fieldSelector=host=h2") == ["b"]
            assert await listed(f"{V1}?fieldSelector=hostPort=h1:80") == ["a"]
            items = (await client.get(V2)).json()["items"]
            assert {(i["host"], i["port"]) for i in items} == {("h1", "80"), ("h2", "8080")}

            converter.broken = True
            failed = await client.get(f"{V2}/a")
            assert failed.status_code == 500, failed.text
            assert "converter is down for maintenance" in failed.json()["message"]
            assert f"endpoints.{GROUP}" in failed.json()["message"]
            assert (await client.get(f"{V1}/a")).status_code == 200  # the storage version needs no call

    serve(exercise)


class NoProgress(MemStorage):
    """A backend that cannot tell progress (etcd 3.4's watch cannot): consistent LISTs come
    from storage."""

    async def progress_supported(self) -> bool:
        return False


def test_a_list_read_from_storage_is_converted_before_selectors_see_it(tmp_path: Path) -> None:
    """Over a storage that cannot tell progress, a LIST is read from storage, not the cache:
    its objects are converted to the served version too, and field selectors on that
    version's fields match them."""
    converter = Converter()
    app = build_app(NoProgress(), Admin(), compaction_interval=0)

    async def go() -> None:
        async with webhook(tmp_path, converter) as (url, ca), app.running():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="https://apiserver") as client:
                assert (await client.post(CRDS, json=crd(url, ca))).status_code == 201
                await established(client, f"endpoints.{GROUP}")
                for name, host_port in (("a", "h1:80"), ("b", "h2:8080")):
                    made = await client.post(V1, json={"metadata": {"name": name}, "hostPort": host_port})
                    assert made.status_code == 201, made.text
                listed = (await client.get(f"{V2}?fieldSelector=host=h2")).json()
                assert [(i["apiVersion"], i["host"], i["port"]) for i in listed["items"]] == [
                    (f"{GROUP}/v2", "h2", "8080")
                ], listed

    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_conversion_webhook_that_times_out_fails_only_its_kinds_reads(tmp_path: Path) -> None:
    """Bad input: a converter that answers after the deadline is kube's 500 naming the webhook
    and the deadline, and the storage version, the CRD and other kinds are served meanwhile."""
    converter = Converter()
    app = build_app(MemStorage(progress=True), Admin(), compaction_interval=0)
    app.api.custom_resources.conversion_timeout = 1  # kube's 30 s, shortened for the test

    async def go() -> None:
        async with webhook(tmp_path, converter) as (url, ca), app.running():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="https://apiserver") as client:
                assert (await client.post(CRDS, json=crd(url, ca))).status_code == 201
                await established(client, f"endpoints.{GROUP}")
                made = await client.post(V1, json={"metadata": {"name": "a"}, "hostPort": "h1:80"})
                assert made.status_code == 201, made.text
                converter.stalled = True
                failed = await client.get(f"{V2}/a")
                assert failed.status_code == 500, failed.text
                message = failed.json()["message"]
                assert f"endpoints.{GROUP}" in message and "context deadline exceeded" in message, message
                assert (await client.get(f"{V1}/a")).status_code == 200
                assert (await client.get(f"{CRDS}/endpoints.{GROUP}")).status_code == 200
                assert (await client.get("/api/v1/namespaces/default/configmaps")).status_code == 200

    asyncio.run(asyncio.wait_for(go(), 30))
