"""POST to a resource that is only ever created and answered, never stored (access reviews,
SelfSubjectReview, TokenReview): the definition names its answerer (`ResourceDef.virtual`), which
the server registers in the scope.  An answerer may return an awaitable (TokenReview asks token
authenticators that read)."""

from __future__ import annotations

import inspect

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http import negotiation
from apiserver.http.handlers.body import read_body, typed_body
from apiserver.http.handlers.responses import answer
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.resources.base import ResourceDef


async def answer_virtual(scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
    if request.method != "POST" or target.name is not None:
        raise errors.method_not_allowed(f"{request.method} is not supported on {res.plural}: only create is")
    if res.namespaced and target.namespace is None:
        raise errors.method_not_allowed(f"{res.plural} are created in a namespace")
    if negotiation.wanted(request.headers.get("accept")).table:
        # an answer is not an object with metadata: kube has no Table of it (conformance "Servers
        # with support for Table transformation should return a 406 for a backend which does
        # not implement metadata")
        raise errors.not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, "
            "application/vnd.kubernetes.protobuf"
        )
    handler = scope.virtual.get(res.virtual or "")
    if handler is None:
        raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
    obj = typed_body(res, await read_body(request))
    obj["apiVersion"], obj["kind"] = res.group_version, res.kind
    result = handler(request.state.user, target.namespace, obj)
    if inspect.isawaitable(result):
        result = await result
    return answer(request, result, 201)
