"""DELETE of one object or of a collection (kube's handlers.DeleteResource and
DeleteCollection), with DeleteOptions from the body or the query."""

from __future__ import annotations

import contextlib

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http import negotiation
from apiserver.http.handlers.body import read_limited
from apiserver.http.handlers.responses import answer, respond
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.params import ListParams
from apiserver.http.requestinfo import ResourcePath
from apiserver.registry.deletion import DeleteOptions
from apiserver.resources.base import ResourceDef, object_fields
from machinery.objects import Obj


async def _options(request: Request, query: dict[str, str]) -> DeleteOptions:
    raw = await read_limited(request)
    # kubectl drain's fallback sends a protobuf DeleteOptions: decoded like JSON
    body = await negotiation.decode_off_loop(raw, request.headers.get("content-type")) if raw.strip() else None
    return DeleteOptions.parse(body, query)


async def delete_object(
    scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath, query: dict[str, str]
) -> Response:
    assert target.name is not None
    options = await _options(request, query)
    obj, gone = await scope.registries[res].delete(target.namespace, target.name, options)
    if gone and not res.return_deleted:
        meta = obj.get("metadata") or {}
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": target.name, "kind": res.plural, "group": res.group, "uid": meta.get("uid", "")},
        }
        return answer(request, status)
    return respond(request, res, obj, scope.clock, 200)


async def delete_collection(
    scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath, p: ListParams, query: dict[str, str]
) -> Response:
    options = await _options(request, query)
    registry = scope.registries[res]
    items = await registry.list_all(target.namespace)
    deleted: list[Obj] = []
    for obj in items:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if p.labels is not None and not p.labels.matches(labels):
            continue
        if p.fields is not None and not p.fields.matches(object_fields(res, obj)):
            continue
        meta = obj["metadata"]
        with contextlib.suppress(errors.StatusError):
            result, _ = await registry.delete(meta.get("namespace"), meta["name"], options)
            deleted.append(result)
    out = {"kind": res.list_kind, "apiVersion": res.group_version, "metadata": {}, "items": deleted}
    return answer(request, out)
