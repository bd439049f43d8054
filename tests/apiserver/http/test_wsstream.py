"""A byte stream read out over a WebSocket as kube's wsstream.Reader frames it (what a pods/log
upgrade becomes): the subprotocol chosen from the client's offer, binary or base64 messages,
the empty first message, a close at the end, and the stream closed when the client leaves
first (a followed log must not outlive its reader).  A real uvicorn in this process; every
wait bounded."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from apiserver import errors
from apiserver.http import wsstream
from components.client.connector import session_closed_to_the_socket
from machinery.process.launch import free_ports

CHUNKS = [b"container is alive\n", b"", b"\x00\xffbytes"]
WAIT_S = 10.0
Body = Callable[[], AsyncGenerator[bytes, None]]


@asynccontextmanager
async def serving(body: Body) -> AsyncIterator[str]:
    """ws:// URL of a route that reads `body()` out as a ByteStream."""

    async def route(websocket: WebSocket) -> None:
        session = wsstream.ByteStream(wsstream.reader_protocol(websocket.scope["subprotocols"]), body())
        await websocket.accept(subprotocol=session.protocol)
        await session.serve(websocket)

    port = free_ports(1)[0]
    app = Starlette(routes=[WebSocketRoute("/log", route)])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    try:
        yield f"ws://127.0.0.1:{port}/log"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, WAIT_S)


async def finite() -> AsyncGenerator[bytes, None]:
    for chunk in CHUNKS:
        yield chunk


async def read_all(body: Body, offered: list[str]) -> tuple[str | None, list[aiohttp.WSMessage], int | None]:
    """(the accepted subprotocol, the data messages, the close code)."""
    async with (
        serving(body) as url,
        session_closed_to_the_socket() as session,
        session.ws_connect(url, protocols=offered) as ws,
    ):
        async with asyncio.timeout(WAIT_S):
            got = [message async for message in ws]
        return ws.protocol, got, ws.close_code


def test_the_protocol_is_the_first_offered_that_a_reader_speaks() -> None:
    assert wsstream.reader_protocol([]) == ""
    assert wsstream.reader_protocol(["v5.channel.k8s.io", wsstream.BASE64, wsstream.BINARY]) == wsstream.BASE64
    with pytest.raises(errors.StatusError) as e:
        wsstream.reader_protocol(["channel.k8s.io"])
    assert (e.value.code, e.value.reason) == (403, "Forbidden")
    assert str(e.value.message).startswith("requested protocol(s) are not supported: [channel.k8s.io]")


@pytest.mark.parametrize("offered", [[wsstream.BINARY], []])
def test_binary_messages_then_a_close(offered: list[str]) -> None:
    protocol, got, code = asyncio.run(read_all(finite, offered))
    assert protocol == (offered[0] if offered else None)
    assert [(m.type, m.data) for m in got] == [(aiohttp.WSMsgType.BINARY, c) for c in (b"", CHUNKS[0], CHUNKS[2])]
    assert code == 1000


def test_base64_text_messages_then_a_close() -> None:
    protocol, got, code = asyncio.run(read_all(finite, ["x", wsstream.BASE64]))
    assert protocol == wsstream.BASE64 and code == 1000
    assert {m.type for m in got} == {aiohttp.WSMsgType.TEXT}
    assert got[0].data == "" and [base64.b64decode(m.data) for m in got[1:]] == [CHUNKS[0], CHUNKS[2]]


def test_the_stream_is_closed_when_the_client_leaves_first() -> None:
    async def go() -> None:
        closed = asyncio.Event()

        async def endless() -> AsyncGenerator[bytes, None]:
            try:
                yield b"line\n"
                await asyncio.sleep(3600)  # a followed log with nothing more to say
            finally:
                closed.set()

        async with serving(endless) as url, session_closed_to_the_socket() as session:
            async with session.ws_connect(url, protocols=[wsstream.BINARY]) as ws:
                async with asyncio.timeout(WAIT_S):
                    assert (await ws.receive_bytes()) == b""
                    assert (await ws.receive_bytes()) == b"line\n"
            async with asyncio.timeout(WAIT_S):
                await closed.wait()  # the followed stream did not outlive its reader

    asyncio.run(go())
