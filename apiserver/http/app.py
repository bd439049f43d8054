"""PLACEHOLDER until the lead's HTTP app is merged: health and version endpoints behind authentication.

Only what `raftkube up` needs to start and wait for the apiserver: every request is
authenticated (401 Status when anonymous); `/healthz`, `/livez`, `/readyz` (which reads the
store's revision) and `/version` answer, anything else is a 404 Status.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from apiserver.auth.authn import Authenticator
from apiserver.errors import StatusError, not_found, unauthorized, unavailable
from apiserver.storage.interface import Storage


def build_app(storage: Storage, authenticator: Authenticator, *, clock: Callable[[], float] = time.time) -> Starlette:
    def status(e: StatusError) -> Response:
        return JSONResponse(e.to_status(), status_code=e.code)

    async def ok(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        try:
            await asyncio.wait_for(storage.current_revision(), 5)
        except Exception:
            return status(unavailable("the store is not reachable"))
        return PlainTextResponse("ok")

    async def version(request: Request) -> Response:
        return JSONResponse({"major": "1", "minor": "33", "gitVersion": "v1.33.0-raftkube", "platform": "linux/amd64"})

    async def missing(request: Request) -> Response:
        return status(not_found("", request.url.path))

    return Starlette(
        routes=[
            Route("/healthz", ok),
            Route("/livez", ok),
            Route("/readyz", readyz),
            Route("/version", version),
            Route("/{path:path}", missing, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ],
        middleware=[Middleware(_Authenticate, authenticator=authenticator)],
    )


class _Authenticate:
    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.authenticator.authenticate(scope) is None:
            e = unauthorized()
            await JSONResponse(e.to_status(), status_code=e.code)(scope, receive, send)
            return
        await self.app(scope, receive, send)
