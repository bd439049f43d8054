"""The REST client over several apiservers (an HA control plane): a request that could not
connect goes to the next apiserver whatever its method, one that broke after it was sent
fails (it may have been applied) and moves the next request on.  Real sockets and TLS: the
apiservers are small HTTPS servers here, one of them refusing, one accepting and never
answering the handshake (a SIGSTOPped process looks so), one cutting answers."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from components.client import rest
from components.client.kubeconfig import ClientConfig
from components.client.rest import RestClient, TransportError
from machinery.process import pki
from machinery.process.launch import free_ports
from tests.support.tls import server_context, serving_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pki.CertFiles:
    return serving_certs(tmp_path_factory.mktemp("pki"))


@asynccontextmanager
async def apiserver(certs: pki.CertFiles, name: str, seen: list[str]) -> AsyncIterator[str]:
    """An HTTPS server that answers every request with `{"server": name}` and records it."""

    async def answer(request: web.Request) -> web.Response:
        seen.append(f"{name} {request.method} {request.path}")
        if request.query.get("watch") == "true":
            response = web.StreamResponse()
            await response.prepare(request)
            await response.write(b'{"type":"ADDED","object":{"server":"%s"}}\n' % name.encode())
            return response  # type: ignore[return-value]
        return web.json_response({"server": name})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_ports(1)[0]
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=server_context(certs)).start()
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def refusing() -> str:
    """A port nothing listens on."""
    return f"https://127.0.0.1:{free_ports(1)[0]}"


@asynccontextmanager
async def stopped() -> AsyncIterator[str]:
    """A socket that listens and never accepts: the kernel completes the TCP handshake, the TLS
    handshake never ends — what a SIGSTOPped apiserver looks like to a client."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield f"https://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def client_for(certs: pki.CertFiles, servers: list[str]) -> RestClient:
    config = ClientConfig(server=servers[0], servers=tuple(servers), ca_data=Path(certs.ca).read_bytes())
    return RestClient(config, timeout=10.0)


def test_a_refused_apiserver_is_skipped_for_any_method(certs: pki.CertFiles) -> None:
    async def go() -> None:
        seen: list[str] = []
        async with apiserver(certs, "b", seen) as b:
            dead = refusing()
            async with client_for(certs, [dead, b]) as client:
                assert client.server == dead
                assert await client.create("/api/v1/namespaces/default/configmaps", {}) == {"server": "b"}
                assert client.server == b  # the next request starts at the one that answered
                assert await client.get("/version") == {"server": "b"}
        assert seen == ["b POST /api/v1/namespaces/default/configmaps", "b GET /version"]

    asyncio.run(go())


def test_a_stopped_apiserver_is_left_after_the_connect_timeout(
    certs: pki.CertFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rest, "CONNECT_TIMEOUT_S", 0.5)

    async def go() -> None:
        seen: list[str] = []
        async with stopped() as hung, apiserver(certs, "b", seen) as b, client_for(certs, [hung, b]) as client:
            started = asyncio.get_running_loop().time()
            assert await client.request("DELETE", "/api/v1/namespaces/default/configmaps/x") == {"server": "b"}
            assert asyncio.get_running_loop().time() - started < 5.0  # not the request's 10 s
        assert seen == ["b DELETE /api/v1/namespaces/default/configmaps/x"]

    asyncio.run(go())


def test_a_request_cut_after_it_was_sent_fails_and_moves_the_next_one_on(certs: pki.CertFiles) -> None:
    async def go() -> None:
        seen: list[str] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            line = await reader.readline()
            seen.append(f"cut {line.decode().split(' ')[0]}")
            writer.close()

        cutter = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_context(certs))
        cut = f"https://127.0.0.1:{cutter.sockets[0].getsockname()[1]}"
        try:
            async with apiserver(certs, "b", seen) as b, client_for(certs, [cut, b]) as client:
                with pytest.raises(TransportError):  # sent: it may have been applied, not resent
                    await client.create("/api/v1/namespaces/default/configmaps", {})
                assert client.server == b
                assert await client.get("/version") == {"server": "b"}
        finally:
            cutter.close()
            await cutter.wait_closed()
        assert seen == ["cut POST", "b GET /version"]

    asyncio.run(go())


def test_when_no_apiserver_answers_the_error_names_them_all(certs: pki.CertFiles) -> None:
    async def go() -> None:
        servers = [refusing(), refusing()]
        async with client_for(certs, servers) as client:
            with pytest.raises(TransportError) as e:
                await client.get("/version")
        assert all(s in str(e.value) for s in servers) and "GET /version" in str(e.value)

    asyncio.run(go())


def test_a_watch_that_cannot_connect_goes_to_the_next_apiserver(certs: pki.CertFiles) -> None:
    async def go() -> None:
        seen: list[str] = []
        async with apiserver(certs, "b", seen) as b, client_for(certs, [refusing(), b]) as client:
            events = [e async for e in client.watch("/api/v1/pods")]
        assert [e.object for e in events] == [{"server": "b"}]
        assert seen == ["b GET /api/v1/pods"]

    asyncio.run(go())
