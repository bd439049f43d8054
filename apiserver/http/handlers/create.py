"""POST of a new object to a collection (kube's handlers.CreateResource)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http import params, patching
from apiserver.http.handlers.body import read_object_body, typed_body
from apiserver.http.handlers.responses import respond, with_warnings
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.resources.base import ResourceDef


async def create_object(
    scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath, query: dict[str, str]
) -> Response:
    if res.namespaced and target.namespace is None:
        raise errors.method_not_allowed(f"{res.plural} are created in a namespace: POST /…/namespaces/NS/{res.plural}")
    w = params.write_params(query, request.headers.get("user-agent", ""))
    body, repeated = await read_object_body(request, w.field_validation)
    obj = typed_body(res, body)
    warnings = patching.prune_body(res, obj, w.field_validation, duplicates=repeated)
    created = await scope.registries[res].create(target.namespace, obj, dry_run=w.dry_run, manager=w.field_manager)
    return with_warnings(respond(request, res, created, scope.clock, 201), warnings)
