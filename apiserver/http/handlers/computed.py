"""GET of a resource computed on request, never stored (metrics.k8s.io's NodeMetrics and
PodMetrics): the definition names its reader (`ResourceDef.computed`), which the server
registers in the scope.  A list takes label and field selectors (metadata.name,
metadata.namespace) and answers as a Table when asked; there is no watch (metrics-server has
none either)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http import negotiation, params
from apiserver.http.handlers.responses import answer
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.resources.base import ResourceDef, object_fields
from apiserver.table import table


async def answer_computed(scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
    if request.method != "GET" or target.subresource:
        raise errors.method_not_allowed(f"{request.method} is not supported on {res.plural}: only get and list are")
    reader = scope.computed.get(res.computed or "")
    if reader is None:
        raise errors.unavailable(f"{res.plural}.{res.group} are not computed by this apiserver")
    want = negotiation.wanted(request.headers.get("accept"))
    if target.name is not None:
        found = reader(target.namespace, target.name)
        if not found:
            raise errors.not_found(res.plural, target.name, res.group)
        if want.table:
            return _table(res, found, scope.clock())
        return answer(request, found[0])
    p = params.list_params(res, dict(request.query_params))
    if p.watch:
        raise errors.method_not_allowed(f"watch is not supported on {res.plural}.{res.group}")
    items = [
        obj
        for obj in reader(target.namespace, None)
        if (p.labels is None or p.labels.matches((obj.get("metadata") or {}).get("labels") or {}))
        and (p.fields is None or p.fields.matches(object_fields(res, obj)))
    ]
    if want.table:
        return _table(res, items, scope.clock())
    return answer(request, {"kind": res.list_kind, "apiVersion": res.group_version, "metadata": {}, "items": items})


def _table(res: ResourceDef, items: list[dict[str, Any]], now: float) -> Response:
    body, content_type = negotiation.encode(table(res, items, now=now), negotiation.Wanted())
    return Response(body, media_type=content_type)
