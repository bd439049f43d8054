"""Writing an answer: the object as the client asked for it (JSON, YAML, protobuf, a Table),
a Status or other non-resource answer, and the `Warning` headers of a write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from apiserver.http import negotiation
from apiserver.resources.base import ResourceDef
from apiserver.table import table
from apiserver.warnings import header_values
from machinery.objects import Obj


def respond(request: Request, res: ResourceDef, obj: Obj, clock: Callable[[], float], code: int = 200) -> Response:
    """An object of `res` in the client's format: a one-row Table when it asks for one."""
    want = negotiation.wanted(request.headers.get("accept"))
    if want.table and obj.get("kind") == res.kind:
        include = request.query_params.get("includeObject", "Metadata") or "Metadata"
        obj = table(res, [obj], now=clock(), include_object=include)
    body, content_type = negotiation.encode(obj, want)
    return Response(body, status_code=code, media_type=content_type)


def answer(request: Request, value: Any, code: int = 200) -> Response:
    """JSON, or protobuf when the client asks for it first (a Status, a Scale, a list)."""
    want = negotiation.wanted(request.headers.get("accept"))
    body, content_type = negotiation.encode(value, negotiation.Wanted(protobuf=want.protobuf))
    return Response(body, status_code=code, media_type=content_type)


def with_warnings(response: Response, warnings: list[str]) -> Response:
    # quoted ASCII-only: a field name outside latin-1 once made the header itself fail (a 500)
    for value in header_values(warnings[:20]):
        response.headers.append("Warning", value)
    return response
