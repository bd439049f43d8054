"""PUT of a whole object (kube's handlers.UpdateResource), or of the part of it a subresource
writes (/status, /finalize: that subresource's strategy keeps the rest)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from apiserver.http import params, patching
from apiserver.http.handlers.body import read_object_body, typed_body
from apiserver.http.handlers.responses import respond, with_warnings
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.registry.strategy import UpdateStrategy
from apiserver.resources.base import ResourceDef


async def update_object(
    scope: ResourceScope,
    request: Request,
    res: ResourceDef,
    target: ResourcePath,
    query: dict[str, str],
    strategy: UpdateStrategy | None = None,
) -> Response:
    """`strategy`: the subresource's (None for the object itself)."""
    assert target.name is not None
    w = params.write_params(query, request.headers.get("user-agent", ""), "UpdateOptions")
    body, repeated = await read_object_body(request, w.field_validation)
    obj = typed_body(res, body)
    warnings = patching.prune_body(res, obj, w.field_validation, duplicates=repeated)
    result, created = await scope.registries[res].update(
        target.namespace,
        target.name,
        obj,
        subresource=strategy,
        dry_run=w.dry_run,
        manager=w.field_manager,
    )
    return with_warnings(respond(request, res, result, scope.clock, 201 if created else 200), warnings)
