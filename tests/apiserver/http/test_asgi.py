"""The apiserver's ASGI application (apiserver.http.asgi): requests go to the dispatcher, other
methods get 405, and the lifespan starts and stops the api, reporting a failure to the server."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from apiserver.http.asgi import ApiApplication


class FakeApi:
    def __init__(self, fail: str = "") -> None:
        self.calls: list[str] = []
        self.fail = fail

    async def start(self) -> None:
        self.calls.append("start")
        if self.fail == "start":
            raise RuntimeError("no store")

    async def stop(self) -> None:
        self.calls.append("stop")
        if self.fail == "stop":
            raise RuntimeError("stuck")


async def echo(request: Request) -> Response:
    return Response(f"{request.method} {request.url.path}?{request.url.query}", media_type="text/plain")


async def refuse(websocket: WebSocket) -> None:
    await websocket.close()


def app_for(api: FakeApi, methods: tuple[str, ...] = ("GET", "POST")) -> ApiApplication:
    return ApiApplication(cast(Any, api), echo, refuse, methods)


def test_requests_reach_the_dispatcher_and_other_methods_get_405() -> None:
    async def go() -> None:
        transport = httpx.ASGITransport(app=app_for(FakeApi()))
        async with httpx.AsyncClient(transport=transport, base_url="https://apiserver") as client:
            r = await client.post("/api/v1/namespaces/a/pods?dryRun=All", content=b"{}")
            assert (r.status_code, r.text) == (200, "POST /api/v1/namespaces/a/pods?dryRun=All")
            r = await client.request("TRACE", "/api")
            assert r.status_code == 405 and r.headers["allow"] == "GET, POST"

    asyncio.run(go())


def lifespan(app: ApiApplication) -> tuple[list[dict[str, Any]], BaseException | None]:
    """Run the lifespan protocol as a server does: startup, then shutdown once started."""
    sent: list[dict[str, Any]] = []
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def send(message: Any) -> None:
        sent.append(message)
        if message["type"] == "lifespan.startup.complete":
            inbox.put_nowait({"type": "lifespan.shutdown"})

    async def go() -> BaseException | None:
        inbox.put_nowait({"type": "lifespan.startup"})
        try:
            await app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send)
        except RuntimeError as e:
            return e
        return None

    raised = asyncio.run(go())
    return sent, raised


def test_the_lifespan_starts_and_stops_the_api() -> None:
    api = FakeApi()
    sent, raised = lifespan(app_for(api))
    assert raised is None
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert api.calls == ["start", "stop"]


@pytest.mark.parametrize("phase", ["start", "stop"])
def test_a_failed_start_or_stop_is_reported_to_the_server_and_raised(phase: str) -> None:
    sent, raised = lifespan(app_for(FakeApi(fail=phase)))
    assert isinstance(raised, RuntimeError)
    failed = {"start": "lifespan.startup.failed", "stop": "lifespan.shutdown.failed"}[phase]
    assert sent[-1]["type"] == failed and "RuntimeError" in sent[-1]["message"]


def test_running_starts_and_stops_the_api_around_in_process_calls() -> None:
    api = FakeApi()

    async def go() -> None:
        async with app_for(api).running() as app:
            assert app.api is cast(Any, api) and api.calls == ["start"]

    asyncio.run(go())
    assert api.calls == ["start", "stop"]
