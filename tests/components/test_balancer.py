"""The apiserver balancer over real sockets: TLS passes through to whichever apiserver is
ready (the client verifies the apiserver's own certificate), new connections go to the one
with the fewest, a refused or unready apiserver leaves the rotation, the connection ceiling
holds, and bytes pass intact both ways.  The apiservers are small HTTPS servers answering
/readyz as they are told and every other path with their name."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from components.balancer import main as balancer_main
from components.balancer.core import Backend, Balancer, readyz_probe
from machinery.process import pki
from machinery.process.launch import free_ports
from tests.support.tls import client_context, server_context, serving_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pki.CertFiles:
    return serving_certs(tmp_path_factory.mktemp("pki"))


@dataclass
class FakeApiserver:
    name: str
    port: int
    ready: bool = True
    runner: web.AppRunner | None = None
    paths: list[str] = field(default_factory=list)


@asynccontextmanager
async def apiserver(certs: pki.CertFiles, name: str) -> AsyncIterator[FakeApiserver]:
    fake = FakeApiserver(name, free_ports(1)[0])

    async def readyz(_request: web.Request) -> web.Response:
        return web.Response(text="ok") if fake.ready else web.Response(status=503, text="not ready")

    async def other(request: web.Request) -> web.Response:
        fake.paths.append(request.path)
        if request.method == "POST":
            return web.Response(body=await request.read())  # an echo
        return web.Response(text=name)

    app = web.Application(client_max_size=64 << 20)
    app.router.add_get("/readyz", readyz)
    app.router.add_route("*", "/{tail:.*}", other)
    server_tls = server_context(certs)
    fake.runner = web.AppRunner(app)
    await fake.runner.setup()
    await web.TCPSite(fake.runner, "127.0.0.1", fake.port, ssl_context=server_tls).start()
    try:
        yield fake
    finally:
        await fake.runner.cleanup()


@asynccontextmanager
async def balancing(
    certs: pki.CertFiles, fakes: list[FakeApiserver], **kwargs: float
) -> AsyncIterator[tuple[Balancer, int]]:
    backends = [Backend("127.0.0.1", f.port) for f in fakes]
    balancer = Balancer(backends, readyz_probe(client_context(certs)), CollectorRegistry(), **kwargs)  # type: ignore[arg-type]
    port = free_ports(1)[0]
    await balancer.start("127.0.0.1", port)
    try:
        yield balancer, port
    finally:
        await balancer.stop()


async def ask(certs: pki.CertFiles, port: int, path: str = "/who", body: bytes | None = None) -> bytes:
    """One HTTPS request through the balancer on its own connection; the answer's body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs))
    method = "POST" if body is not None else "GET"
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body or b'')}\r\n\r\n"
    writer.write(head.encode() + (body or b""))
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer.partition(b"\r\n\r\n")[2]


def test_connections_spread_over_the_ready_apiservers_through_tls(certs: pki.CertFiles) -> None:
    async def go() -> None:
        async with apiserver(certs, "a") as a, apiserver(certs, "b") as b, balancing(certs, [a, b]) as (_, port):
            answers = [await ask(certs, port) for _ in range(6)]
        assert sorted(answers) == [b"a"] * 3 + [b"b"] * 3

    asyncio.run(go())


def test_open_connections_steer_new_ones_to_the_less_loaded_apiserver(certs: pki.CertFiles) -> None:
    async def go() -> None:
        async with apiserver(certs, "a") as a, apiserver(certs, "b") as b, balancing(certs, [a, b]) as (bal, port):
            held = [await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs)) for _ in range(3)]
            loads = sorted(be.connections for be in bal.backends)
            assert loads == [1, 2]
            assert bal.candidates()[0].connections == 1
            for _, w in held:
                w.close()

    asyncio.run(go())


def test_a_refused_apiserver_leaves_the_rotation_before_any_probe(certs: pki.CertFiles) -> None:
    async def go() -> None:
        async with (
            apiserver(certs, "a") as a,
            apiserver(certs, "b") as b,
            balancing(certs, [a, b], probe_interval=3600) as (bal, port),
        ):
            assert b.runner is not None
            await b.runner.cleanup()  # b is gone: connects are refused
            answers = [await ask(certs, port) for _ in range(4)]
            assert answers == [b"a"] * 4
            assert [be.healthy for be in bal.backends] == [True, False]
            assert "ConnectionRefusedError" in bal.backends[1].why

    asyncio.run(go())


def test_an_unready_apiserver_leaves_and_rejoins_with_the_probes(certs: pki.CertFiles) -> None:
    async def go() -> None:
        async with apiserver(certs, "a") as a, apiserver(certs, "b") as b, balancing(certs, [a, b]) as (bal, port):
            b.ready = False
            await bal.probe_all()
            assert [await ask(certs, port) for _ in range(4)] == [b"a"] * 4
            assert bal.backends[1].why == "/readyz answered 503 Service"
            b.ready = True
            await bal.probe_all()
            assert b"b" in [await ask(certs, port) for _ in range(4)]

    asyncio.run(go())


def test_with_no_ready_apiserver_connections_are_closed_and_health_says_why(certs: pki.CertFiles) -> None:
    async def go() -> None:
        async with apiserver(certs, "a") as a, balancing(certs, [a]) as (bal, port):
            a.ready = False
            await bal.probe_all()
            with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
                await ask(certs, port)
            assert bal.healthy() is not None and "no apiserver is ready" in (bal.healthy() or "")
            a.ready = True
            await bal.probe_all()
            assert bal.healthy() is None and await ask(certs, port) == b"a"

    asyncio.run(go())


def test_past_the_connection_ceiling_new_clients_are_closed(certs: pki.CertFiles) -> None:
    async def go() -> None:
        async with apiserver(certs, "a") as a, balancing(certs, [a], max_connections=2) as (bal, port):
            held = [await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs)) for _ in range(2)]
            with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
                await ask(certs, port)
            refused = bal.metrics.refused.labels("max_connections")._value.get()
            assert refused == 1
            for _, w in held:
                w.close()
                await w.wait_closed()
            for _ in range(50):  # the balancer sees the closes
                if bal.open_connections == 0:
                    break
                await asyncio.sleep(0.05)
            assert await ask(certs, port) == b"a"

    asyncio.run(go())


def test_large_bodies_pass_intact_both_ways(certs: pki.CertFiles) -> None:
    async def go() -> None:
        payload = bytes(range(256)) * (20 * 4096)  # 20 MiB: many times the per-connection buffer
        async with apiserver(certs, "a") as a, balancing(certs, [a]) as (_, port):
            assert await ask(certs, port, "/echo", payload) == payload

    asyncio.run(go())


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--listen", "localhost:6443"], "--listen localhost:6443: not an IP address"),
        (["--listen", "127.0.0.1:0"], "'0' is not a port"),
        (["--listen", "127.0.0.1:6443", "--max-connections", "0"], "--max-connections 0: from 1"),
        (["--listen", "127.0.0.1:6443", "--probe-interval", "0"], "--probe-interval 0.0: from 0.05"),
        (["--listen", "127.0.0.1:7001"], "is one of the apiservers it balances"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    tmp_path: Path, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "contexts: [{name: c, context: {cluster: k}}]\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443', extensions: [{name: raftkube.io/apiservers,"
        " extension: {servers: ['https://127.0.0.1:7001', 'https://127.0.0.1:7002']}}]}}]\n"
    )
    assert balancer_main.main(["--kubeconfig", str(config), *argv]) == 2
    assert says in capsys.readouterr().err


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=300))
def test_a_probe_of_an_apiserver_answering_anything_says_ready_only_for_200(
    certs: pki.CertFiles, answer: bytes
) -> None:
    """Whatever bytes come back to /readyz: a reason or ready (a 200 status line), never a crash."""

    async def go() -> str | None:
        server_tls = server_context(certs)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_tls)
        try:
            return await readyz_probe(client_context(certs))(Backend("127.0.0.1", server.sockets[0].getsockname()[1]))
        finally:
            server.close()

    why = asyncio.run(go())
    fields = answer.split(b"\n", 1)[0].split()
    assert (why is None) == (len(fields) >= 2 and fields[1] == b"200")
