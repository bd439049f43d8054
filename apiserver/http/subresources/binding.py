"""`pods/binding` (kube's BindingREST): the scheduler's one write of spec.nodeName."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from apiserver.http.handlers.body import read_body
from apiserver.http.handlers.responses import answer
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.registry import subresources
from apiserver.resources.base import ResourceDef


class BindingHandler(SubresourceHandler):
    async def create(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        assert target.name is not None
        body = await read_body(request)
        dry_run = request.query_params.get("dryRun") == "All"
        await subresources.bind(scope.registries[res], target.namespace, target.name, body, dry_run=dry_run)
        return answer(request, subresources.success(res.plural, target.name), 201)
