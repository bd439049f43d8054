"""`*/scale` (kube's ScaleREST): an autoscaling/v1 Scale read from and written to the object's
spec.replicas, so that `kubectl scale` and autoscalers work on any kind that declares it.  The
kind says how its label selector reads as text (the Scale's status.selector)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from apiserver.http import params, patching
from apiserver.http.handlers.body import read_body
from apiserver.http.handlers.patch import read_patch
from apiserver.http.handlers.responses import answer
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.registry import subresources
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj


def _no_selector(obj: Obj) -> str:
    return ""


@dataclass(frozen=True, eq=False)
class ScaleHandler(SubresourceHandler):
    # the object -> its selector as text ("app=web"); a kind without one shows ""
    selector: Callable[[Obj], str] = _no_selector

    async def get(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        assert target.name is not None
        obj = await scope.registries[res].get(target.namespace, target.name)
        return answer(request, subresources.scale_of(obj, self.selector))

    async def update(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        assert target.name is not None
        w = params.write_params(dict(request.query_params), request.headers.get("user-agent", ""), "UpdateOptions")
        body = await read_body(request)
        obj = await subresources.write_scale(
            scope.registries[res], target.namespace, target.name, body, dry_run=w.dry_run, manager=w.field_manager
        )
        return answer(request, subresources.scale_of(obj, self.selector))

    async def patch(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        assert target.name is not None
        patch = await read_patch(request, dict(request.query_params))

        def scale_mutation(old: Obj | None) -> Obj:
            assert old is not None
            patched = patching.apply_patch(
                patch.content_type,
                subresources.scale_of(old, self.selector),
                patch.body,
                "Scale",
                "autoscaling",
                patch.options,
            )
            old.setdefault("spec", {})["replicas"] = subresources.replicas_from_scale(patched)
            old["metadata"].pop("resourceVersion", None)
            return old

        result, _ = await scope.registries[res].mutate(
            target.namespace, target.name, scale_mutation, dry_run=patch.options.dry_run
        )
        return answer(request, subresources.scale_of(result, self.selector))
