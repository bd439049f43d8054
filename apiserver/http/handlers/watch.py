"""GET of a collection with `watch=true` (kube's handlers.ListResource in its watch branch): a
chunked stream of events from the watch cache, holding one in-flight watch seat until it ends."""

from __future__ import annotations

import orjson
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from apiserver import errors
from apiserver.http import negotiation
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.params import ListParams
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.watch_stream import WatchBody, json_line, table_line
from apiserver.resources.base import ResourceDef


async def watch_objects(
    scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath, p: ListParams
) -> Response:
    want = negotiation.wanted(request.headers.get("accept"))
    seat = scope.inflight.acquire("watch", getattr(request.state, "user", None))
    try:
        watcher = await scope.caches[res].watch(
            namespace=target.namespace,
            labels=p.labels,
            fields=p.fields,
            resource_version=p.resource_version,
            allow_bookmarks=p.allow_bookmarks,
            send_initial_events=p.send_initial_events,
        )
    except BaseException as e:
        seat.release()
        if not isinstance(e, errors.StatusError) or e.code != 410:
            raise
        # kube answers a watch from a compacted revision with a stream holding one ERROR
        # event (410 Expired), which reflectors take as "re-list"
        line = orjson.dumps({"type": "ERROR", "object": e.to_status()}) + b"\n"
        return Response(line, media_type=negotiation.JSON)
    if want.table:
        key, make = f"table:{res.plural}:{p.include_object}", table_line(res, p.include_object, scope.clock)
    else:
        key, make = "json", json_line
    watch_body = WatchBody(watcher, key, make, p.timeout_seconds, on_end=seat.release)
    return StreamingResponse(
        watch_body.chunks(),
        media_type=negotiation.JSON,
        headers={"Transfer-Encoding": "chunked"},
        background=BackgroundTask(watch_body.end),
    )
