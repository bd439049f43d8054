"""Subresources that are the object itself, written through their own strategy (kube's
StatusREST, FinalizeREST): a GET answers the object; a PUT or PATCH goes to the registry with
the handler's `UpdateStrategy` (apiserver/registry/strategy.py), which keeps every part the
subresource does not own (/status keeps spec, /finalize changes only spec.finalizers).  A kind
built at run time serves its own such subresource with `ObjectViewHandler(its strategy)`; a
built-in kind whose /status resets more than spec, with `status_view(those paths)`."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from apiserver.http.handlers.get import get_object
from apiserver.http.handlers.patch import patch_object
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.handlers.update import update_object
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.registry.strategy import BUILTIN_STATUS, FINALIZE, STATUS, UpdateStrategy, status_resetting
from apiserver.resources.base import ResourceDef


@dataclass(frozen=True, eq=False)
class ObjectViewHandler(SubresourceHandler):
    # what a write through this subresource takes from the request and keeps from the object
    strategy: UpdateStrategy

    async def get(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await get_object(scope, request, res, target)

    async def update(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await update_object(scope, request, res, target, dict(request.query_params), self.strategy)

    async def patch(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await patch_object(scope, request, res, target, dict(request.query_params), self.strategy)


def status_view(*resets: tuple[str, ...]) -> ObjectViewHandler:
    """The /status of a built-in kind whose GetResetFields names `resets` besides spec."""
    return ObjectViewHandler(status_resetting(*resets))


# stateless: one serves the /status of every built-in kind that resets only spec, one a custom
# resource's /status (only status from the request), one namespaces' /finalize
STATUS_VIEW = ObjectViewHandler(BUILTIN_STATUS)
CUSTOM_STATUS_VIEW = ObjectViewHandler(STATUS)
FINALIZE_VIEW = ObjectViewHandler(FINALIZE)
