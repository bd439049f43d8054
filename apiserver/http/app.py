"""The apiserver's HTTP application: one Starlette app, one dispatcher for every path.

Per request: authenticate (401 without credentials) -> parse the path (requestinfo) ->
decode and check the body (negotiation) -> the verb on the resource's registry or watch
cache -> encode as JSON, YAML or a Table.  Every failure leaves as a `metav1.Status`; an
unexpected exception is logged and answered 500 without a traceback.  Authorization and
admission slot in between authentication and the registry (next issue).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from apiserver import discovery, errors, openapi, version
from apiserver.compactor import DEFAULT_INTERVAL, compact_forever
from apiserver.http import negotiation
from apiserver.http.inflight import kind_of
from apiserver.http.metrics import Metrics
from apiserver.http.requestinfo import parse_resource_path
from apiserver.http.resources import ResourceHandlers
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef
from apiserver.storage.interface import Storage

log = logging.getLogger("raftkube.apiserver")

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


class Authenticator(Protocol):
    def authenticate(self, scope: Any) -> Any: ...


def status_response(err: errors.StatusError, accept: str | None = None) -> Response:
    """The error as a Status: protobuf when the client asks for it first (client-go's typed
    clients), else JSON."""
    want = negotiation.wanted(accept) if accept else negotiation.Wanted()
    body, content_type = negotiation.encode(err.to_status(), negotiation.Wanted(protobuf=want.protobuf))
    return Response(body, status_code=err.code, media_type=content_type)


class Api:
    """Everything a request may reach, built once per server."""

    def __init__(
        self,
        storage: Storage,
        resources: tuple[ResourceDef, ...],
        clock: Callable[[], float],
        compaction_interval: float = DEFAULT_INTERVAL,
        watch_cache_capacity: int = 10_000,
    ) -> None:
        self.storage = storage
        self.compaction_interval = compaction_interval
        self._compactor: asyncio.Task[None] | None = None
        self.clock = clock
        self.handlers = ResourceHandlers(storage, resources, clock, watch_cache_capacity)
        self.resources = resources
        self.metrics = Metrics()
        self.inflight = self.handlers.inflight
        self.openapi = openapi.OpenAPIDocuments(resources)

    async def start(self) -> None:
        await self.handlers.start()
        if self.compaction_interval > 0:
            self._compactor = asyncio.create_task(compact_forever(self.storage, self.compaction_interval))

    async def stop(self) -> None:
        if self._compactor is not None:
            self._compactor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._compactor
        await self.handlers.stop()

    def ready(self) -> bool:
        return self.handlers.ready()


def build_app(
    storage: Storage,
    authenticator: Authenticator,
    *,
    clock: Callable[[], float] = time.time,
    resources: tuple[ResourceDef, ...] | None = None,
    compaction_interval: float = DEFAULT_INTERVAL,
    watch_cache_capacity: int = 10_000,
) -> Starlette:
    """`compaction_interval`: seconds between storage compactions (0: never, for a storage
    that another apiserver or etcd itself compacts).  `watch_cache_capacity`: events each
    resource's watch cache keeps for watches that resume (older ones get 410 Expired)."""
    api = Api(
        storage, resources if resources is not None else catalog(), clock, compaction_interval, watch_cache_capacity
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await api.start()
        try:
            yield
        finally:
            await api.stop()

    async def dispatch(request: Request) -> Response:
        started = time.perf_counter()
        verb = request.method
        resource_label = ""
        code = 500
        try:
            user = authenticator.authenticate(request.scope)
            if hasattr(user, "__await__"):
                user = await user
            if user is None:
                raise errors.unauthorized()
            request.state.user = user
            with api.inflight.admit(kind_of(request.method)):
                response = await _route(api, request)
            code = response.status_code
            return response
        except errors.StatusError as e:
            code = e.code
            return status_response(e, request.headers.get("accept"))
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return status_response(errors.internal("an internal error occurred; the server logged it"))
        finally:
            path = parse_resource_path(request.url.path)
            # only served resources become labels: a client cannot grow the metrics by inventing paths
            if path is not None and (path.group, path.version, path.resource) in api.handlers.by_path:
                resource_label = path.resource
            if verb not in METHODS:
                verb = "OTHER"
            api.metrics.observe(verb, resource_label, code, time.perf_counter() - started)

    app = Starlette(routes=[Route("/{path:path}", dispatch, methods=list(METHODS))], lifespan=lifespan)
    app.state.api = api
    return app


def _json(value: Any, code: int = 200, content_type: str = negotiation.JSON) -> Response:
    return Response(orjson.dumps(value), status_code=code, media_type=content_type)


async def _route(api: Api, request: Request) -> Response:
    path = request.url.path.rstrip("/") or "/"
    if request.method == "GET":
        if path in ("/healthz", "/livez"):
            return PlainTextResponse("ok")
        if path == "/readyz":
            if not api.ready():
                raise errors.unavailable("the watch caches are not ready yet")
            return PlainTextResponse("ok")
        if path == "/version":
            return _json(version.version_info())
        if path == "/metrics":
            body, content_type = api.metrics.render()
            return Response(body, media_type=content_type)
        found = _discovery(api, request, path)
        if found is not None:
            return found
        if path == "/openapi/v3":
            return Response(api.openapi.root(), media_type=negotiation.JSON)
        if path.startswith("/openapi/v3/"):
            body, etag = api.openapi.document(path[len("/openapi/v3/") :])
            headers = {"ETag": etag}
            if request.query_params.get("hash") == etag.strip('"'):
                headers["Cache-Control"] = "public, immutable"
            return Response(body, media_type=negotiation.JSON, headers=headers)
    target = parse_resource_path(path)
    if target is None:
        raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
    if request.method == "HEAD":
        return Response(status_code=405)
    return await api.handlers.handle(request, target)


def _discovery(api: Api, request: Request, path: str) -> Response | None:
    if path in ("/api", "/apis"):
        server = f"{request.url.hostname}:{request.url.port}" if request.url.port else str(request.url.hostname)
        body, content_type = discovery.discovery_root(
            api.resources, request.headers.get("accept", ""), core=path == "/api", server_address=server
        )
        return _json(body, content_type=content_type)
    parts = [p for p in path.split("/") if p]
    if len(parts) == 2 and parts[0] == "api":
        return _json(discovery.api_resource_list(api.resources, parts[1]))
    if len(parts) == 3 and parts[0] == "apis":
        return _json(discovery.api_resource_list(api.resources, f"{parts[1]}/{parts[2]}"))
    if len(parts) == 2 and parts[0] == "apis":
        return _json(discovery.api_group(api.resources, parts[1]))
    return None


__all__ = ["build_app", "status_response"]
# StreamingResponse is re-exported for the resource handlers' watch responses.
_ = StreamingResponse
