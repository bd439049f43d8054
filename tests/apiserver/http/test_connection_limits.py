"""The edge's timeouts and connection ceiling, on uvicorn's own protocol in this process (plain
TCP; the TLS apiserver process is tests/apiserver/test_edge_attacks.py)."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn

from apiserver.config import ApiserverSettings
from apiserver.http.connection_limits import ConnectionLimits, guarded
from apiserver.http.inflight import InFlightLimits
from apiserver.main import add_arguments, edge_limits
from apiserver.tls_scope import protocol_class
from machinery.process.command import UsageError
from machinery.process.launch import free_ports

LIMITS = ConnectionLimits(header_timeout=0.5, body_timeout=0.5, idle_timeout=0.3, max_connections=4)
REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


async def app(scope: Any, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    answer = b"got %d" % len(body)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(answer))]})
    await send({"type": "http.response.body", "body": answer})


@asynccontextmanager
async def serving(limits: ConnectionLimits = LIMITS) -> AsyncIterator[int]:
    port = free_ports(1)[0]
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        http=guarded(protocol_class(), limits),
        log_level="warning",
        lifespan="off",
        timeout_keep_alive=limits.idle_timeout,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(200):
        if server.started:
            break
        await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 5)


async def closed_after(reader: asyncio.StreamReader, limit: float) -> float | None:
    """Seconds until the server closed the connection; None if still open after `limit`."""
    started = time.monotonic()
    try:
        while True:
            left = limit - (time.monotonic() - started)
            if left <= 0:
                return None
            if not await asyncio.wait_for(reader.read(4096), left):
                return time.monotonic() - started
    except TimeoutError:
        return None
    except ConnectionError:
        return time.monotonic() - started


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 20))


def test_a_request_in_one_write_is_served_and_kept_alive_until_idle() -> None:
    async def t() -> None:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(3):  # kept alive: the header clock restarts after each response
                writer.write(REQUEST)
                assert (await reader.readuntil(b"got 0")).startswith(b"HTTP/1.1 200")
                await asyncio.sleep(0.2)
            gone = await closed_after(reader, 2)
            assert gone is not None and gone < 0.45  # the idle timeout (0.3 s) closed it
            writer.close()

    run(t)


def test_a_kept_alive_connection_idles_past_the_header_timeout_until_the_idle_timeout() -> None:
    """The header clock starts at a request's first byte, not at the end of the last response.

    A connection the server drops while idle races the client's next request on it; Go's client
    retries only idempotent requests, so `kubectl drain`'s eviction POST, sent again 5 s after a
    refusal, failed with EOF when the connection was cut 5 s after that refusal.
    """

    async def t() -> None:
        async with serving(ConnectionLimits(header_timeout=0.3, idle_timeout=1.2, max_connections=4)) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(REQUEST)
            await reader.readuntil(b"got 0")
            assert await closed_after(reader, 0.7) is None  # idle longer than the header timeout: still open
            writer.write(REQUEST)
            assert (await reader.readuntil(b"got 0")).startswith(b"HTTP/1.1 200")
            started = time.monotonic()
            gone = await closed_after(reader, 3)
            assert gone is not None and 1.0 < time.monotonic() - started < 2.0  # the idle timeout closed it
            writer.close()

    run(t)


def test_headers_sent_a_byte_at_a_time_are_cut_off_at_the_header_timeout() -> None:
    async def t() -> None:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            started = time.monotonic()
            closed = False
            for byte in REQUEST[:-2]:  # never completes: one byte each 0.05 s
                writer.write(bytes([byte]))
                if await closed_after(reader, 0.05) is not None:
                    closed = True
                    break
            assert closed and 0.45 < time.monotonic() - started < 1.0
            writer.close()

    run(t)


def test_a_silent_connection_and_a_second_request_that_dribbles_are_both_cut_off() -> None:
    async def t() -> None:
        async with serving(ConnectionLimits(header_timeout=0.5, idle_timeout=5, max_connections=4)) as port:
            silent_reader, silent = await asyncio.open_connection("127.0.0.1", port)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(REQUEST)
            await reader.readuntil(b"got 0")
            writer.write(b"G")  # the next request's first byte stops uvicorn's keep-alive clock, not ours
            gone = await closed_after(reader, 2)
            assert gone is not None and gone < 0.7
            assert await closed_after(silent_reader, 0.1) is not None  # opened earlier: already cut off
            writer.close()
            silent.close()

    run(t)


def test_a_body_that_never_completes_is_cut_off_at_the_body_timeout() -> None:
    async def t() -> None:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
            gone = await closed_after(reader, 2)
            assert gone is not None and 0.4 < gone < 0.8
            writer.close()
            # a body that does come in time is fine
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234")
            await asyncio.sleep(0.2)
            writer.write(b"56789")
            assert b"got 10" in await reader.readuntil(b"got 10")
            writer.close()

    run(t)


def test_connections_past_the_ceiling_are_closed_at_once() -> None:
    async def t() -> None:
        async with serving(ConnectionLimits(header_timeout=5, max_connections=4)) as port:
            held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert await closed_after(reader, 1) is not None
            writer.close()
            held[0][1].write(REQUEST)  # those within the ceiling are served
            assert b"got 0" in await held[0][0].readuntil(b"got 0")
            held.pop()[1].close()
            await asyncio.sleep(0.05)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(REQUEST)  # a slot freed: served again
            assert b"got 0" in await reader.readuntil(b"got 0")
            for _, w in [*held, (reader, writer)]:
                w.close()

    run(t)


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="header_timeout"):
        ConnectionLimits(header_timeout=0)
    with pytest.raises(ValueError, match="max_connections"):
        ConnectionLimits(max_connections=0)


def test_cluster_toml_settings_become_the_apiserver_limits() -> None:
    """What `raftkube up` passes (ApiserverSettings.edge_flags) is what the apiserver enforces."""
    settings = ApiserverSettings(
        request_header_timeout=2.5, max_connections=7, max_watches_inflight=30, inflight_per_user_floor=3
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    connections, seats = edge_limits(parser.parse_args(list(settings.edge_flags())))
    assert connections == ConnectionLimits(header_timeout=2.5, body_timeout=60, idle_timeout=90, max_connections=7)
    assert seats == InFlightLimits(reads=400, writes=200, watches=30, floor=3)
    with pytest.raises(UsageError, match="--request-header-timeout"):
        edge_limits(parser.parse_args(["--request-header-timeout", "0"]))
    with pytest.raises(UsageError, match="--max-watches-inflight"):
        edge_limits(parser.parse_args(["--max-watches-inflight", "0"]))
