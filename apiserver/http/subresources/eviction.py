"""`pods/eviction` (kube's EvictionREST): a delete that the pod's PodDisruptionBudget may
refuse.  The handler names the resource that holds the budgets, as data, so the HTTP layer
knows no budget kind; when that resource is not served every eviction is a plain delete."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from apiserver.http.handlers.body import read_body
from apiserver.http.handlers.responses import answer
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.registry import eviction, subresources
from apiserver.resources.base import ResourceDef


@dataclass(frozen=True, eq=False)
class EvictionHandler(SubresourceHandler):
    # (group, version, plural) of the PodDisruptionBudgets an eviction spends
    budgets: tuple[str, str, str] = ("policy", "v1", "poddisruptionbudgets")

    async def create(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        assert target.name is not None
        body = await read_body(request)
        budgets_def = scope.by_path.get(self.budgets)
        budgets = scope.registries.get(budgets_def) if budgets_def is not None else None
        query = dict(request.query_params)
        await eviction.evict(scope.registries[res], target.namespace, target.name, body, query, budgets)
        return answer(request, subresources.success(res.plural, target.name), 201)
