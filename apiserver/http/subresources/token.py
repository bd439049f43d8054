"""`serviceaccounts/token` (kube's TokenREST): a TokenRequest answered with a signed token,
never stored.  The signer belongs to the server (`ResourceScope.token_requests`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http.handlers.body import read_body
from apiserver.http.handlers.responses import answer, with_warnings
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.resources.base import ResourceDef


class TokenRequestHandler(SubresourceHandler):
    async def create(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        if scope.token_requests is None:  # a server that signs no tokens serves no TokenRequest
            raise errors.method_not_allowed(f"{request.method} is not supported on {res.plural}")
        assert target.name is not None and target.namespace is not None
        body = await read_body(request)
        token = await scope.token_requests.create(target.namespace, target.name, body)
        return with_warnings(answer(request, token.body, 201), list(token.warnings))
