"""An aiohttp connector whose close can be awaited to the last socket.

RestClient uses it, and so do the tests that speak WebSocket or SPDY to the apiserver with a
session of their own.  It reaches into one aiohttp hook (`_create_connection`, stable since
aiohttp 3.0) because aiohttp offers no public way to learn of a connection once it has left
the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


class TrackedConnector(aiohttp.TCPConnector):
    """A connector that remembers every connection it opened, so a client's close can wait
    until each has really closed.

    A connection closed while the client lives (a watch cancelled, an answer not kept alive)
    leaves the pool at once, but its TLS shutdown goes on: close_notify out, the server's back,
    then the socket is closed over two more loop iterations.  The pool's own close does not wait
    for those.  When the server answers slowly (a loaded machine), the event loop could end
    first and leave the socket open: a ResourceWarning later, at some other test's garbage
    collection.  A timed sleep only guessed at how long that takes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._open: dict[ResponseHandler, asyncio.Transport] = {}
        """Each connection not yet lost, with its transport as opened.  The transport is kept
        here because aiohttp forgets it (`proto.transport = None`) as soon as it starts the
        close: a TLS goodbye that outlasts `wait_closed`'s timeout could not be aborted then,
        and the socket outlived the event loop (a ResourceWarning in CI)."""

    async def _create_connection(self, req: Any, traces: Any, timeout: Any) -> ResponseHandler:
        proto = await super()._create_connection(req, traces, timeout)
        lost, transport = proto.closed, proto.transport
        if lost is not None and transport is not None:
            self._open[proto] = transport
            lost.add_done_callback(functools.partial(self._lost, proto))
        return proto

    def _lost(self, proto: ResponseHandler, lost: asyncio.Future[None]) -> None:
        self._open.pop(proto, None)
        _retrieve(lost)  # a connection lost with an error sets it on the future

    def open_connections(self) -> int:
        """Connections it opened whose sockets are not closed yet."""
        return len(self._open)

    async def wait_closed(self, timeout: float) -> None:
        """Until every connection it opened has lost its transport; those still open after
        `timeout` seconds (their TLS goodbye unanswered) are aborted, their sockets closed."""
        waiting = [f for proto in self._open if (f := proto.closed) is not None and not f.done()]
        if not waiting:
            return
        _, late = await asyncio.wait(waiting, timeout=timeout)
        if late:
            for transport in list(self._open.values()):
                transport.abort()
            await asyncio.wait(late, timeout=1.0)


@contextlib.asynccontextmanager
async def session_closed_to_the_socket(timeout: float = 5.0) -> AsyncIterator[aiohttp.ClientSession]:
    """An aiohttp session whose exit returns once every connection it opened is closed (a
    WebSocket's too, which leaves the pool when it ends); see TrackedConnector."""
    connector = TrackedConnector()
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session
    await connector.wait_closed(timeout)
