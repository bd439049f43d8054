"""Probes run for real: exec commands (pass, fail, timeout), HTTP GETs against a server on
127.0.0.1 (2xx/3xx pass, others fail, named ports, headers), TCP connects (open and closed
ports), each within its timeout."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp import web

from components.kubelet.prober import Outcome, resolve_port, run
from components.kubelet.probes import Probe
from machinery.process.launch import free_ports

ENV = {"PATH": "/usr/bin:/bin"}


def probe(**spec: Any) -> Probe:
    return Probe.parse("readinessProbe", spec, "p")


def go(p: Probe, container: dict[str, Any] | None = None) -> Outcome:
    return asyncio.run(run(p, container or {}, "127.0.0.1", ENV, None))


def test_exec_passes_on_zero_fails_otherwise_and_on_timeout() -> None:
    assert go(probe(exec={"command": ["true"]})) == Outcome(True)
    failed = go(probe(exec={"command": ["sh", "-c", "echo not yet; exit 3"]}))
    assert not failed.ok and failed.reason == "command exited with 3: not yet"
    t0 = time.monotonic()
    slow = go(probe(exec={"command": ["sleep", "10"]}, timeoutSeconds=1))
    assert not slow.ok and "timed out after 1s" in slow.reason and time.monotonic() - t0 < 5
    assert not go(probe(exec={"command": ["/nonexistent"]})).ok


def test_http_get_by_status_code_with_named_ports_and_headers() -> None:
    seen: list[str] = []

    async def scenario() -> list[Outcome]:
        async def ok(request: web.Request) -> web.Response:
            seen.append(request.headers.get("X-Probe", ""))
            return web.Response(text="fine")

        async def redirect(_: web.Request) -> web.Response:
            return web.Response(status=302, headers={"Location": "/elsewhere"})

        async def broken(_: web.Request) -> web.Response:
            return web.Response(status=503)

        app = web.Application()
        app.router.add_get("/healthz", ok)
        app.router.add_get("/moved", redirect)
        app.router.add_get("/broken", broken)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        port = free_ports(1)[0]
        await web.TCPSite(runner, "127.0.0.1", port).start()
        container = {"ports": [{"name": "http", "containerPort": port}]}
        try:
            return [
                await run(
                    probe(
                        httpGet={
                            "path": "/healthz",
                            "port": "http",
                            "httpHeaders": [{"name": "X-Probe", "value": "yes"}],
                        }
                    ),
                    container,
                    "127.0.0.1",
                    ENV,
                    None,
                ),
                await run(probe(httpGet={"path": "/moved", "port": port}), container, "127.0.0.1", ENV, None),
                await run(probe(httpGet={"path": "/broken", "port": port}), container, "127.0.0.1", ENV, None),
                await run(probe(httpGet={"path": "/", "port": "nope"}), container, "127.0.0.1", ENV, None),
            ]
        finally:
            await runner.cleanup()

    healthz, moved, broken, unnamed = asyncio.run(scenario())
    assert healthz.ok and moved.ok and seen == ["yes"]
    assert broken == Outcome(False, "HTTP probe failed with statuscode: 503")
    assert unnamed == Outcome(False, "invalid port 'nope'")


def test_tcp_socket_open_and_closed() -> None:
    async def scenario() -> tuple[Outcome, Outcome]:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            return (
                await run(probe(tcpSocket={"port": port}), {}, "127.0.0.1", ENV, None),
                await run(probe(tcpSocket={"port": free_ports(1)[0]}), {}, "127.0.0.1", ENV, None),
            )
        finally:
            server.close()
            await server.wait_closed()

    open_, closed = asyncio.run(scenario())
    assert open_.ok and not closed.ok and closed.reason.startswith("dial tcp 127.0.0.1:")


@pytest.mark.parametrize(
    ("port", "expected"), [(80, 80), ("8080", 8080), ("web", 9000), ("other", None), (0, None), (True, None)]
)
def test_port_resolution(port: Any, expected: int | None) -> None:
    assert resolve_port(port, {"ports": [{"name": "web", "containerPort": 9000}]}) == expected


def test_a_grpc_probe_asks_the_health_service_at_the_pods_ip() -> None:
    """Nothing listens: the probe fails in kube's words (grpcprobe.py's tests cover the answers)."""
    [port] = free_ports(1)
    out = go(probe(grpc={"port": port}, timeoutSeconds=1))
    assert not out.ok and out.reason.startswith(f"timeout: failed to connect service '127.0.0.1:{port}'")
