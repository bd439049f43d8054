"""GET of a collection (kube's handlers.ListResource): from the watch cache, or from storage
when a consistent read cannot be served by the cache (no progress notifications), as a list
or a Table."""

from __future__ import annotations

import functools

from starlette.requests import Request
from starlette.responses import Response

from apiserver.http import negotiation
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.params import ListParams
from apiserver.http.requestinfo import ResourcePath
from apiserver.registry.storage_list import list_from_storage
from apiserver.resources.base import ResourceDef, object_fields
from apiserver.table import table
from machinery.objects import Obj


async def list_objects(
    scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath, p: ListParams
) -> Response:
    want = negotiation.wanted(request.headers.get("accept"))
    if (not p.resource_version or p.continue_token) and not await scope.storage.progress_supported():
        registry = scope.registries[res]
        page = await list_from_storage(
            scope.storage,
            res,
            registry.decode,
            functools.partial(object_fields, res),
            namespace=target.namespace,
            labels=p.labels,
            fields=p.fields,
            limit=p.limit,
            continue_token=p.continue_token,
            served=registry.served,
        )
    else:
        page = await scope.caches[res].list(
            namespace=target.namespace,
            labels=p.labels,
            fields=p.fields,
            resource_version=p.resource_version,
            match=p.match,
            limit=p.limit,
            continue_token=p.continue_token,
        )
    if want.table:
        body = table(
            res,
            page.items,
            now=scope.clock(),
            include_object=p.include_object,
            resource_version=str(page.resource_version),
            continue_token=page.continue_token,
            remaining=page.remaining,
        )
        encoded, content_type = negotiation.encode(body, negotiation.Wanted())
        return Response(encoded, media_type=content_type)
    list_meta: Obj = {"resourceVersion": str(page.resource_version)}
    if page.continue_token:
        list_meta["continue"] = page.continue_token
        if page.remaining is not None:
            list_meta["remainingItemCount"] = page.remaining
    out = {"kind": res.list_kind, "apiVersion": res.group_version, "metadata": list_meta, "items": page.items}
    encoded, content_type = negotiation.encode(out, want)
    return Response(encoded, media_type=content_type)
