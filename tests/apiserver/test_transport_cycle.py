"""A closed connection's socket transport dies by reference counting, without the cyclic
collector (which the apiserver's heap keeper keeps away from anything frozen)."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from collections.abc import Iterator

import pytest

from apiserver import transport_cycle


class Recorder(asyncio.Protocol):
    """The server side: notes its transport (weakly) and when the connection is lost."""

    def __init__(self, seen: list[weakref.ref[asyncio.BaseTransport]], lost: asyncio.Event) -> None:
        self._seen = seen
        self._lost = lost

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._seen.append(weakref.ref(transport))

    def data_received(self, data: bytes) -> None:
        pass

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost.set()


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _closed_server_transports(connections: int) -> list[weakref.ref[asyncio.BaseTransport]]:
    loop = asyncio.get_running_loop()
    seen: list[weakref.ref[asyncio.BaseTransport]] = []
    events: list[asyncio.Event] = []

    def protocol() -> Recorder:
        events.append(asyncio.Event())
        return Recorder(seen, events[-1])

    server = await loop.create_server(protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        for _ in range(connections):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"hello")
            await writer.drain()
            writer.close()
            await writer.wait_closed()
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), 10.0)
        for _ in range(3):  # the loop's own handles on the transports go with the next turns
            await asyncio.sleep(0)
    finally:
        server.close()
        await server.wait_closed()
    return seen


def test_installing_mends_only_the_pythons_that_need_it_and_only_once() -> None:
    assert transport_cycle.install() is (sys.version_info < (3, 12))
    first = asyncio.selector_events._SelectorSocketTransport._call_connection_lost  # type: ignore[attr-defined]
    transport_cycle.install()
    assert asyncio.selector_events._SelectorSocketTransport._call_connection_lost is first  # type: ignore[attr-defined]


def test_a_closed_connection_leaves_no_transport_for_the_collector(no_collector: None) -> None:
    transport_cycle.install()
    seen = asyncio.run(_closed_server_transports(20))
    assert len(seen) == 20
    assert [ref for ref in seen if ref() is not None] == []
