"""A real HTTPS admission webhook server on 127.0.0.1 (its own CA and certificate), and an
in-process apiserver whose webhook plugins read configurations from a test source.

The server answers each path with a handler `(review) -> answer`: a dict is sent as the
response of an AdmissionReview (uid filled in), bytes are sent as the raw body.  It records
every review and every connection it saw, and `release` ends handlers that wait on purpose.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
from aiohttp import web

from apiserver.admission.webhook.config import CompiledHooks
from apiserver.admission.webhook.mutating import MutatingWebhook
from apiserver.admission.webhook.validating import ValidatingWebhook
from apiserver.auth.authn import Authenticator
from apiserver.http.app import Api, build_app
from machinery.objects import Obj
from machinery.process import pki
from tests.apiserver.gates_support import ADMIN
from tests.apiserver.memstorage import MemStorage

Answer = Obj | bytes
Handler = Callable[[Obj], Awaitable[Answer] | Answer]
REGISTRATION = "admissionregistration.k8s.io/v1"


@dataclass(frozen=True)
class TLS:
    server: ssl.SSLContext
    ca_bundle: str  # base64 PEM, as clientConfig.caBundle holds it


def make_tls(directory: Path, name: str = "webhook", hosts: tuple[str, ...] = ("127.0.0.1",)) -> TLS:
    """A CA and a serving certificate for `hosts` (a service's webhook: `<svc>.<ns>.svc`)."""
    ca = pki.create_ca(directory, f"{name} test CA")
    files = pki.issue_cert(ca, directory, name, common_name=name, hosts=hosts, server=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.cert, files.key)
    return TLS(context, base64.b64encode(files.ca.read_bytes()).decode())


def allow(review: Obj) -> Obj:
    return {"allowed": True}


@dataclass
class WebhookServer:
    tls: TLS
    handlers: dict[str, Handler] = field(default_factory=dict)
    reviews: dict[str, list[Obj]] = field(default_factory=dict)
    connections: set[int] = field(default_factory=set)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    async def _handle(self, request: web.Request) -> web.Response:
        if request.transport is not None:
            self.connections.add(id(request.transport))
        review = orjson.loads(await request.read())
        self.reviews.setdefault(request.path, []).append(review)
        handler = self.handlers.get(request.path, allow)
        answer = handler(review)
        if not isinstance(answer, dict | bytes):
            answer = await answer
        if isinstance(answer, bytes):
            return web.Response(body=answer, content_type="application/json")
        response = {"uid": review["request"]["uid"], **answer}
        body = {"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}
        return web.Response(body=orjson.dumps(body), content_type="application/json")


@contextlib.asynccontextmanager
async def webhook_server(tls: TLS) -> AsyncIterator[WebhookServer]:
    server = WebhookServer(tls)
    app = web.Application()
    app.router.add_post("/{tail:.*}", server._handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.server)
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()


class Source:
    """Webhook configurations as a watch cache offers them: objects() and a moving generation."""

    def __init__(self) -> None:
        self.generation = 0
        self._objects: list[Obj] = []

    def objects(self) -> list[Obj]:
        return list(self._objects)

    def set(self, *objects: Obj) -> None:
        self._objects = list(objects)
        self.generation += 1


def hook(name: str, url: str, ca_bundle: str, **fields: Any) -> Obj:
    """A webhook entry; `rules` default to CREATE/UPDATE of configmaps."""
    entry: Obj = {
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [
            {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }
    entry.update(fields)
    return entry


def service_client_config(namespace: str, name: str, port: int, path: str, ca_bundle: str) -> Obj:
    """A clientConfig naming a service, as the conformance webhooks register themselves."""
    ref: Obj = {"namespace": namespace, "name": name, "port": port, "path": path}
    return {"service": ref, "caBundle": ca_bundle}


def configuration(kind: str, name: str, *hooks: Obj) -> Obj:
    return {"apiVersion": REGISTRATION, "kind": kind, "metadata": {"name": name}, "webhooks": list(hooks)}


@dataclass
class Cluster:
    client: httpx.AsyncClient
    api: Api
    mutating: Source
    validating: Source


@contextlib.asynccontextmanager
async def in_process_with_webhooks() -> AsyncIterator[Cluster]:
    """An apiserver app in this process whose webhook plugins read `mutating`/`validating`."""
    app = build_app(MemStorage(progress=True), Authenticator({"admin": ADMIN}), compaction_interval=0)
    api: Api = app.api
    mutating, validating = Source(), Source()
    for plugin in (*api.admission.mutating, *api.admission.validating):
        if isinstance(plugin, MutatingWebhook):
            plugin.dispatcher.hooks = CompiledHooks(lambda: mutating, mutating=True)
        if isinstance(plugin, ValidatingWebhook):
            plugin.dispatcher.hooks = CompiledHooks(lambda: validating, mutating=False)
    async with app.running():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="https://apiserver", headers={"Authorization": "Bearer admin"}
        ) as client:
            yield Cluster(client, api, mutating, validating)
