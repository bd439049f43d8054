"""The apiserver's ASGI application: its lifespan, its requests and its WebSocket upgrades,
each handed straight to its handler.

Every path goes to one dispatcher (apiserver.http.app routes by itself), so a framework's
router, its two exception middlewares and its per-request wrapping were only time spent:
between uvicorn and the dispatcher the profile held nothing but Starlette's frames, and in a
microbenchmark a bare ASGI callable took a third off the HTTP layer's CPU a request.
Starlette's Request, Response and WebSocket stay: the handlers speak them.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

if TYPE_CHECKING:
    from apiserver.http.app import Api

Handler = Callable[[Request], Awaitable[Response]]
Streamer = Callable[[WebSocket], Awaitable[None]]


class ApiApplication:
    """`handle` answers every HTTP request whose method is one of `methods` (others get 405,
    naming the allowed ones); `stream` serves every WebSocket upgrade; the lifespan starts and
    stops `api` (its watch caches, controllers and leases) with the server."""

    def __init__(self, api: Api, handle: Handler, stream: Streamer, methods: Collection[str]) -> None:
        self.api = api
        self._handle = handle
        self._stream = stream
        self._methods = frozenset(methods)
        self._allow = ", ".join(sorted(self._methods))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if scope["method"] in self._methods:
                response = await self._handle(Request(scope, receive, send))
            else:
                response = PlainTextResponse("Method Not Allowed", status_code=405, headers={"Allow": self._allow})
            await response(scope, receive, send)
        elif kind == "websocket":
            await self._stream(WebSocket(scope, receive, send))
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ApiApplication]:
        """The api started and, on leaving, stopped: the lifespan without a server (tests that
        call the application in process)."""
        await self.api.start()
        try:
            yield self
        finally:
            await self.api.stop()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """ASGI's lifespan protocol: a failed start or stop is reported to the server (which
        then exits) and raised."""
        while True:
            message = await receive()
            phase = message["type"].removeprefix("lifespan.")
            if phase not in ("startup", "shutdown"):
                continue
            try:
                await (self.api.start() if phase == "startup" else self.api.stop())
            except BaseException:
                await send({"type": f"lifespan.{phase}.failed", "message": traceback.format_exc()})
                raise
            await send({"type": f"lifespan.{phase}.complete"})
            if phase == "shutdown":
                return
