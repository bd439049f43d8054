"""GET of one object (kube's handlers.GetResource)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from apiserver.http.handlers.responses import respond
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.resources.base import ResourceDef


async def get_object(scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
    assert target.name is not None
    obj = await scope.registries[res].get(target.namespace, target.name)
    return respond(request, res, obj, scope.clock)
