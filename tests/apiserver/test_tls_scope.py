"""The peer certificate reaches the app through uvicorn (apiserver.tls_scope), over real TLS."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from uvicorn._types import ASGIReceiveCallable, ASGISendCallable, Scope
from uvicorn.protocols.http.h11_impl import H11Protocol

from apiserver.auth.authn import Authenticator
from apiserver.auth.user import User
from apiserver.main import _Server
from apiserver.pki import ApiserverPKI
from apiserver.tls_scope import TLSScopeH11Protocol, protocol_class
from machinery.process import pki
from machinery.process.launch import free_ports


def _whoami(authenticator: Authenticator) -> object:
    async def app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        user = authenticator.authenticate(scope)
        body = json.dumps(None if user is None else [user.name, list(user.groups)]).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    return app


@contextlib.asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[tuple[str, ApiserverPKI]]:
    creds = ApiserverPKI.of(tmp_path)
    creds.ensure()
    authenticator = Authenticator.from_files(creds.tokens, creds.ca)
    tls = pki.server_context(pki.CertFiles(creds.serving.cert, creds.serving.key, creds.ca), require_client_cert=False)
    port = free_ports(1)[0]
    config = uvicorn.Config(
        _whoami(authenticator),  # type: ignore[arg-type]
        host="127.0.0.1",
        port=port,
        http=protocol_class(),
        ssl_context_factory=lambda _c, _d: tls,
        log_level="warning",
        lifespan="off",
    )
    srv = _Server(config)
    task = asyncio.create_task(srv.serve())
    for _ in range(200):
        if srv.started:
            break
        await asyncio.sleep(0.02)
    try:
        yield f"https://127.0.0.1:{port}", creds
    finally:
        srv.should_exit = True
        await asyncio.wait_for(task, 10)


def _client(creds: ApiserverPKI, cert: pki.CertFiles | None = None) -> httpx.AsyncClient:
    ctx = ssl.create_default_context(cafile=str(creds.ca))
    if cert is not None:
        ctx.load_cert_chain(cert.cert, cert.key)
    return httpx.AsyncClient(verify=ctx)


def test_the_installed_protocol_is_ours() -> None:
    """Without httptools (not a dependency) uvicorn's h11 protocol, with our connection_made."""
    cls = protocol_class()
    assert cls is TLSScopeH11Protocol or cls.__name__ == "TLSScopeHttpToolsProtocol"
    assert issubclass(TLSScopeH11Protocol, H11Protocol)


def test_client_certificate_token_and_nothing(tmp_path: Path) -> None:
    asyncio.run(_certificate_token_and_nothing(tmp_path))


async def _certificate_token_and_nothing(tmp_path: Path) -> None:
    async with serving(tmp_path) as (url, creds):
        async with _client(creds, creds.admin) as c:
            assert (await c.get(url)).json() == ["admin", ["system:masters", "system:authenticated"]]
            # the same connection again (keep-alive): the extension is there for every request
            assert (await c.get(url)).json() == ["admin", ["system:masters", "system:authenticated"]]
        token = creds.admin_token()
        async with _client(creds) as c:
            assert (await c.get(url, headers={"Authorization": f"Bearer {token}"})).json()[0] == "admin"
            assert (await c.get(url, headers={"Authorization": "Bearer nope"})).json() is None
            assert (await c.get(url)).json() is None


def test_a_certificate_from_another_ca_fails_the_handshake(tmp_path: Path) -> None:
    asyncio.run(_another_ca(tmp_path))


async def _another_ca(tmp_path: Path) -> None:
    async with serving(tmp_path) as (url, creds):
        other = pki.create_ca(tmp_path / "other")
        foreign = pki.issue_cert(other, tmp_path / "o", "admin", common_name="admin", client=True)
        async with _client(creds, foreign) as c:
            with pytest.raises(httpx.HTTPError):
                await c.get(url)


def test_user_type() -> None:
    assert User("a").groups == () and User("a").uid == ""
