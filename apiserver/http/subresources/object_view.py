"""Subresources that are the object itself, written through their own strategy (kube's
StatusREST, FinalizeREST): a GET answers the object; a PUT or PATCH goes to the registry under
the subresource's name, whose strategy (apiserver/registry/meta.py) keeps every part the
subresource does not own (/status keeps spec, /finalize changes only spec.finalizers)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from apiserver.http.handlers.get import get_object
from apiserver.http.handlers.patch import patch_object
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.handlers.update import update_object
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.resources.base import ResourceDef


class ObjectViewHandler(SubresourceHandler):
    async def get(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await get_object(scope, request, res, target)

    async def update(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await update_object(scope, request, res, target, dict(request.query_params))

    async def patch(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await patch_object(scope, request, res, target, dict(request.query_params))


# one stateless handler serves every kind's /status and namespaces' /finalize
OBJECT_VIEW = ObjectViewHandler()
