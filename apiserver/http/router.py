"""Which handler serves a resource request: the resource found by its path, then the verb's
handler module (apiserver/http/handlers/) for the collection or the object, or the handler
object the definition declares for a subresource (apiserver/http/subresources/).

The router knows no resource or subresource by name: a kind defined at run time (from a
CustomResourceDefinition) is served as soon as its `ResourceDef` is in the scope.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http import params
from apiserver.http.handlers.computed import answer_computed
from apiserver.http.handlers.create import create_object
from apiserver.http.handlers.delete import delete_collection, delete_object
from apiserver.http.handlers.get import get_object
from apiserver.http.handlers.list import list_objects
from apiserver.http.handlers.patch import patch_object
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.handlers.update import update_object
from apiserver.http.handlers.virtual import answer_virtual
from apiserver.http.handlers.watch import watch_objects
from apiserver.http.requestinfo import ResourcePath
from apiserver.resources.base import ResourceDef, Subresource

# the discovery verb a method on a named object's subresource needs
_SUBRESOURCE_VERBS = {
    "GET": "get",
    "PUT": "update",
    "PATCH": "patch",
    "POST": "create",
    "DELETE": "delete",
    "OPTIONS": "get",  # only the proxy subresources relay these two (kube's connect verbs)
    "HEAD": "get",
}


def _not_found() -> errors.StatusError:
    return errors.StatusError(404, "NotFound", "the server could not find the requested resource")


def find_subresource(scope: ResourceScope, target: ResourcePath) -> tuple[ResourceDef, Subresource] | None:
    """The resource and the declared subresource a path names, None when it names none."""
    res = scope.by_path.get((target.group, target.version, target.resource))
    sub = res.subresource(target.subresource) if res is not None and target.subresource else None
    return (res, sub) if res is not None and sub is not None else None


async def route(scope: ResourceScope, request: Request, target: ResourcePath) -> Response:
    res = scope.by_path.get((target.group, target.version, target.resource))
    if res is None:
        raise _not_found()
    if res.namespaced is False and target.namespace is not None:
        raise _not_found()
    method = request.method
    sub: Subresource | None = None
    if target.subresource:
        sub = res.subresource(target.subresource)
        if sub is None:
            raise _not_found()
        if _SUBRESOURCE_VERBS.get(method) not in sub.verbs:
            raise errors.method_not_allowed(
                f"{method} is not supported on {res.plural}/{sub.name} (it supports {', '.join(sub.verbs)})"
            )
    query = dict(request.query_params)
    if res.virtual:
        return await answer_virtual(scope, request, res, target)
    if res.computed:
        return await answer_computed(scope, request, res, target)
    if target.name is None:
        if method == "GET":
            p = params.list_params(res, query)
            if p.watch:
                return await watch_objects(scope, request, res, target, p)
            return await list_objects(scope, request, res, target, p)
        if method == "POST":
            return await create_object(scope, request, res, target, query)
        if method == "DELETE":
            return await delete_collection(scope, request, res, target, params.list_params(res, query), query)
        raise errors.method_not_allowed(f"{method} is not supported on a collection of {res.plural}")
    if sub is not None:
        handler = sub.handler
        if method in ("GET", "HEAD"):
            return await handler.get(scope, request, res, target)
        if method == "PUT":
            return await handler.update(scope, request, res, target)
        if method == "PATCH":
            return await handler.patch(scope, request, res, target)
        if method == "POST":
            return await handler.create(scope, request, res, target)
        if method == "DELETE":
            return await handler.delete(scope, request, res, target)
        if method == "OPTIONS":
            return await handler.options(scope, request, res, target)
        raise errors.method_not_allowed(f"{method} is not supported on {res.plural}")
    if method == "GET":
        return await get_object(scope, request, res, target)
    if method == "PUT":
        return await update_object(scope, request, res, target, query)
    if method == "PATCH":
        return await patch_object(scope, request, res, target, query)
    if method == "DELETE":
        return await delete_object(scope, request, res, target, query)
    raise errors.method_not_allowed(f"{method} is not supported on {res.plural}")
