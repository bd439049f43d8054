"""API aggregation against a real HTTPS server behind an APIService: an in-process apiserver
with its front-proxy certificate, an aiohttp server on 127.0.0.1 that requires a client
certificate of the front-proxy CA (as an aggregated server trusts only it), reached through a
Service and its EndpointSlice.

The APIService turns Available ("all checks passed") once the server answers its discovery;
requests for its group-version are relayed with the user in `X-Remote-*` headers and never the
caller's credentials; discovery (aggregated and legacy) lists its resources; without
endpoints it turns unavailable with kube's reason and requests get 503.  The apiserver
publishes kube-system/extension-apiserver-authentication and the role that reads it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver.aggregator.front_proxy import BadCABundle, FrontProxy
from apiserver.auth.user import User
from apiserver.http.app import build_app
from apiserver.pki import ApiserverPKI
from machinery.process import pki
from tests.apiserver.memstorage import MemStorage

GROUP, VERSION = "wardle.example.com", "v1alpha1"
NAME = f"{VERSION}.{GROUP}"
APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
FLUNDERS = f"/apis/{GROUP}/{VERSION}/namespaces/default/flunders"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

RESOURCE_LIST = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": f"{GROUP}/{VERSION}",
    "resources": [
        {
            "name": "flunders",
            "singularName": "flunder",
            "namespaced": True,
            "kind": "Flunder",
            "verbs": ["get", "list", "create"],
        },
        {"name": "flunders/status", "singularName": "", "namespaced": True, "kind": "Flunder", "verbs": ["get"]},
        {"name": "broken", "kind": 7, "verbs": "all"},  # hostile: not an APIResource, left out
    ],
}


class Tester:
    """The tester with a bearer token, anyone else nobody (401)."""

    def authenticate(self, scope: Any) -> User | None:
        if (b"authorization", b"Bearer nobody") in scope.get("headers", []):
            return None
        return User("tester", ("system:masters", "system:authenticated"), extra=(("scopes", ("a b",)),))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Wardle:
    """The aggregated server: answers discovery and flunders, records each request's headers."""

    def __init__(self) -> None:
        self.seen: list[dict[str, list[str]]] = []

    async def handle(self, request: web.Request) -> web.Response:
        headers: dict[str, list[str]] = {}
        for k, v in request.headers.items():
            headers.setdefault(k.lower(), []).append(v)
        self.seen.append(headers)
        if request.path == f"/apis/{GROUP}/{VERSION}":
            return web.json_response(RESOURCE_LIST)
        if request.path == "/openapi/v3":
            url = f"/openapi/v3/apis/{GROUP}/{VERSION}?hash=ABC"
            return web.json_response({"paths": {f"apis/{GROUP}/{VERSION}": {"serverRelativeURL": url}}})
        if request.path == f"/openapi/v3/apis/{GROUP}/{VERSION}":
            return web.json_response({"openapi": "3.0.0", "components": {"schemas": {"Flunder": {}}}})
        if request.method == "POST":
            return web.json_response({"kind": "Flunder", "created": orjson.loads(await request.read())}, status=201)
        return web.json_response({"kind": "FlunderList", "items": [], "query": request.query_string})


@contextlib.asynccontextmanager
async def wardle_server(tmp: Path, front_proxy_ca: Path, wardle: Wardle) -> AsyncIterator[tuple[int, str]]:
    ca = pki.create_ca(tmp / "wardle", "wardle test CA")
    files = pki.issue_cert(
        ca, tmp / "wardle", "wardle", common_name="wardle", hosts=("wardle.default.svc",), server=True
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.cert, files.key)
    context.verify_mode = ssl.CERT_REQUIRED  # only the front proxy may call
    context.load_verify_locations(front_proxy_ca)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", wardle.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    try:
        yield port, base64.b64encode(files.ca.read_bytes()).decode()
    finally:
        await runner.cleanup()


def serve(tmp: Path, exercise: Callable[[httpx.AsyncClient, int, str, Wardle], Awaitable[None]]) -> None:
    files = ApiserverPKI(tmp / "apiserver").front_proxy_client()
    proxy = FrontProxy(files.cert, files.key, files.ca.read_text())
    app = build_app(
        MemStorage(progress=True), Tester(), compaction_interval=0, front_proxy=proxy, client_ca_pem="CLIENT CA PEM"
    )
    app.api.apiservices.recheck = 0.3  # notice lost endpoints quickly
    wardle = Wardle()

    async def go() -> None:
        async with wardle_server(tmp, files.ca, wardle) as (port, bundle), app.running():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="https://apiserver") as client:
                await asyncio.wait_for(exercise(client, port, bundle, wardle), 30)

    asyncio.run(go())


async def until(check: Callable[[], Awaitable[Any]], what: str, seconds: float = 10) -> Any:
    for _ in range(int(seconds / 0.05)):
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def register(client: httpx.AsyncClient, port: int, bundle: str) -> None:
    service = {"metadata": {"name": "wardle"}, "spec": {"ports": [{"port": 443, "targetPort": port}]}}
    assert (await client.post("/api/v1/namespaces/default/services", json=service)).status_code == 201
    endpoint_slice = {
        "metadata": {"name": "wardle-1", "labels": {"kubernetes.io/service-name": "wardle"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        "ports": [{"port": port, "protocol": "TCP"}],
    }
    created = await client.post("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", json=endpoint_slice)
    assert created.status_code == 201, created.text
    apiservice = {
        "metadata": {"name": NAME},
        "spec": {
            "group": GROUP,
            "version": VERSION,
            "service": {"namespace": "default", "name": "wardle", "port": 443},
            "caBundle": bundle,
            "groupPriorityMinimum": 2000,
            "versionPriority": 200,
        },
    }
    created = await client.post(APISERVICES, json=apiservice)
    assert created.status_code == 201, created.text


async def available(client: httpx.AsyncClient, status: str = "True") -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        for cond in (await client.get(f"{APISERVICES}/{NAME}/status")).json().get("status", {}).get("conditions", []):
            if cond["type"] == "Available" and cond["status"] == status:
                return dict(cond)
        return None

    found: dict[str, Any] = await until(check, f"{NAME} Available={status}")
    return found


def test_a_remote_group_version_is_checked_relayed_for_the_user_and_discovered(tmp_path: Path) -> None:
    async def exercise(client: httpx.AsyncClient, port: int, bundle: str, wardle: Wardle) -> None:
        # before its APIService exists the path is ours: not found
        assert (await client.get(FLUNDERS)).status_code == 404
        await register(client, port, bundle)
        cond = await available(client)
        assert (cond["reason"], cond["message"]) == ("Passed", "all checks passed")
        check = wardle.seen[0]
        assert check["x-remote-user"] == ["system:kube-aggregator"] and check["x-remote-group"] == ["system:masters"]

        got = await client.get(
            f"{FLUNDERS}?limit=5", headers={"Authorization": "Bearer secret", "X-Remote-User": "forged"}
        )
        assert got.status_code == 200 and got.json() == {"kind": "FlunderList", "items": [], "query": "limit=5"}
        seen = wardle.seen[-1]
        assert seen["x-remote-user"] == ["tester"]  # the caller's forged header is dropped
        assert seen["x-remote-group"] == ["system:masters", "system:authenticated"]
        assert seen["x-remote-extra-scopes"] == ["a b"]
        assert "authorization" not in seen
        created = await client.post(FLUNDERS, json={"kind": "Flunder", "metadata": {"name": "f"}})
        assert created.status_code == 201 and created.json()["created"]["metadata"] == {"name": "f"}
        assert wardle.seen[-1]["content-type"] == ["application/json"]
        # a body without a Content-Type goes without one (a kube server reads it as JSON)
        bare = await client.post(FLUNDERS, content=b'{"kind": "Flunder"}')
        assert bare.status_code == 201 and "content-type" not in wardle.seen[-1]

        # nobody: refused here, never relayed
        relayed = len(wardle.seen)
        refused = await client.get(FLUNDERS, headers={"Authorization": "Bearer nobody"})
        assert refused.status_code == 401 and len(wardle.seen) == relayed

        aggregated = (await client.get("/apis", headers={"Accept": AGGREGATED})).json()
        wardle_group = next(g for g in aggregated["items"] if g["metadata"]["name"] == GROUP)
        (version,) = wardle_group["versions"]
        (flunders,) = version["resources"]
        assert flunders["resource"] == "flunders" and flunders["scope"] == "Namespaced"
        assert flunders["responseKind"] == {"group": GROUP, "version": VERSION, "kind": "Flunder"}
        assert [s["subresource"] for s in flunders["subresources"]] == ["status"]
        legacy = (await client.get("/apis")).json()
        assert {
            "name": GROUP,
            "versions": [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}],
            "preferredVersion": {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION},
        } in legacy["groups"]
        assert (await client.get(f"/apis/{GROUP}")).json()["preferredVersion"]["version"] == VERSION
        # the group-version's own discovery is the server's
        assert (await client.get(f"/apis/{GROUP}/{VERSION}")).json()["groupVersion"] == f"{GROUP}/{VERSION}"
        # and so is its OpenAPI v3 document, which the root lists beside ours (kubectl explain)
        paths = (await client.get("/openapi/v3")).json()["paths"]
        assert paths[f"apis/{GROUP}/{VERSION}"] == {"serverRelativeURL": f"/openapi/v3/apis/{GROUP}/{VERSION}?hash=ABC"}
        assert "api/v1" in paths
        document = await client.get(f"/openapi/v3/apis/{GROUP}/{VERSION}?hash=ABC")
        assert document.json()["components"]["schemas"] == {"Flunder": {}}

        # the endpoints go: unavailable in kube's words, requests 503, discovery drops the group
        gone = await client.delete("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/wardle-1")
        assert gone.status_code == 200
        cond = await available(client, "False")
        assert cond["reason"] == "MissingEndpoints"
        assert cond["message"] == 'endpoints for service/wardle in "default" have no addresses'
        refused = await client.get(FLUNDERS)
        assert refused.status_code == 503 and refused.json()["reason"] == "ServiceUnavailable"
        aggregated = (await client.get("/apis", headers={"Accept": AGGREGATED})).json()
        assert GROUP not in {g["metadata"]["name"] for g in aggregated["items"]}

    serve(tmp_path, exercise)


def test_the_trust_aggregated_servers_need_is_published(tmp_path: Path) -> None:
    async def exercise(client: httpx.AsyncClient, port: int, bundle: str, wardle: Wardle) -> None:
        path = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
        data = (await until(lambda: _ok(client, path), "the authentication ConfigMap"))["data"]
        ca = (tmp_path / "apiserver" / "pki" / "front-proxy" / "ca.crt").read_text()
        assert data["client-ca-file"] == "CLIENT CA PEM" and data["requestheader-client-ca-file"] == ca
        assert json.loads(data["requestheader-allowed-names"]) == ["front-proxy-client"]
        assert json.loads(data["requestheader-username-headers"]) == ["X-Remote-User"]
        assert json.loads(data["requestheader-group-headers"]) == ["X-Remote-Group"]
        assert json.loads(data["requestheader-extra-headers-prefix"]) == ["X-Remote-Extra-"]
        role = (
            await client.get(
                "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/"
                "extension-apiserver-authentication-reader"
            )
        ).json()
        assert role["rules"][0]["resourceNames"] == ["extension-apiserver-authentication"]
        # a local APIService is available as soon as it is seen
        local = {
            "metadata": {"name": "v1.example.local"},
            "spec": {"group": "example.local", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1},
        }
        assert (await client.post(APISERVICES, json=local)).status_code == 201

        async def local_available() -> bool:
            conds = (await client.get(f"{APISERVICES}/v1.example.local")).json().get("status", {}).get("conditions", [])
            return any(c["reason"] == "Local" and c["status"] == "True" for c in conds)

        await until(local_available, "the local APIService Available")

    serve(tmp_path, exercise)


async def _ok(client: httpx.AsyncClient, path: str) -> dict[str, Any] | None:
    got = await client.get(path)
    return dict(got.json()) if got.status_code == 200 else None


def test_an_apiservice_whose_ca_bundle_is_not_pem_fails_its_discovery_check(tmp_path: Path) -> None:
    """Bad input: a caBundle that is not base64 PEM makes the APIService unavailable with kube's
    FailedDiscoveryCheck and a message naming the field; requests are 503, never relayed
    unverified; the right bundle makes it available."""

    async def exercise(client: httpx.AsyncClient, port: int, bundle: str, wardle: Wardle) -> None:
        await register(client, port, base64.b64encode(b"not a certificate").decode())
        cond = await available(client, "False")
        assert cond["reason"] == "FailedDiscoveryCheck"
        assert cond["message"].startswith("spec.caBundle holds no usable PEM certificates")
        refused = await client.get(FLUNDERS)
        assert refused.status_code == 503 and wardle.seen == []
        fixed = await client.patch(
            f"{APISERVICES}/{NAME}",
            json={"spec": {"caBundle": bundle}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert fixed.status_code == 200, fixed.text
        assert (await available(client))["reason"] == "Passed"

    serve(tmp_path, exercise)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.one_of(st.binary(max_size=300).map(lambda b: base64.b64encode(b).decode()), st.text(max_size=100)))
def test_any_ca_bundle_gives_a_context_or_bad_ca_bundle(tmp_path: Path, raw: str) -> None:
    files = ApiserverPKI(tmp_path / "apiserver").front_proxy_client()
    proxy = FrontProxy(files.cert, files.key, files.ca.read_text())
    try:
        proxy.client_context(raw, insecure=False)
    except BadCABundle as e:
        assert str(e).startswith("spec.caBundle holds no usable PEM certificates")


def test_what_this_server_serves_is_listed_as_local_apiservices(tmp_path: Path) -> None:
    """kube's autoregister: every built-in group-version kube registers is a Local APIService
    (available, kube's priorities); a CRD's group-version gets one while a CRD serves it."""

    async def exercise(client: httpx.AsyncClient, port: int, bundle: str, wardle: Wardle) -> None:
        async def listed() -> dict[str, Any] | None:
            items = (await client.get(APISERVICES)).json()["items"]
            by_name = {s["metadata"]["name"]: s for s in items}
            local = [s for s in by_name.values() if "v1." in by_name and is_local_and_available(s)]
            return by_name if len(local) == len(by_name) and "v1.stable.example.com" not in by_name else None

        def is_local_and_available(s: dict[str, Any]) -> bool:
            conditions = s.get("status", {}).get("conditions", [])
            return "service" not in s["spec"] and any(c["reason"] == "Local" for c in conditions)

        by_name = await until(listed, "the local APIServices")
        assert {"v1.", "v1.apps", "v2.autoscaling", "v1.storage.k8s.io", "v1beta1.metrics.k8s.io"} <= set(by_name)
        core = by_name["v1."]
        assert core["spec"] == {"group": "", "version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}
        assert core["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
        assert "v1.apiregistration.k8s.io" not in by_name  # kube's table does not name it

        crd = {
            "metadata": {"name": "gizmos.stable.example.com"},
            "spec": {
                "group": "stable.example.com",
                "scope": "Namespaced",
                "names": {"plural": "gizmos", "kind": "Gizmo"},
                "versions": [
                    {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
                ],
            },
        }
        crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        assert (await client.post(crds, json=crd)).status_code == 201

        async def custom(present: bool) -> bool:
            names = {s["metadata"]["name"] for s in (await client.get(APISERVICES)).json()["items"]}
            return ("v1.stable.example.com" in names) == present

        await until(lambda: custom(True), "the CRD's APIService")
        gizmo = (await client.get(f"{APISERVICES}/v1.stable.example.com")).json()
        assert gizmo["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "true"}
        assert (gizmo["spec"]["groupPriorityMinimum"], gizmo["spec"]["versionPriority"]) == (1000, 100)
        assert (await client.delete(f"{crds}/gizmos.stable.example.com")).status_code == 200
        await until(lambda: custom(False), "the CRD's APIService removed")

    serve(tmp_path, exercise)
