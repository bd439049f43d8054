"""Subresources that relay every HTTP method to a backend — `pods/proxy` and `services/proxy`.

What they share lives here once: the apiserver must have a relay (apiserver.http.pod_proxy)
at all, a bare `.../proxy` answers kube's 301 to `.../proxy/`, the body is read within the
apiserver's limit, and links in the answer are rewritten under the subresource's prefix.  A
subclass says only where the request goes (`upstream_url`)."""

from __future__ import annotations

from typing import ClassVar

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http.handlers.body import read_limited
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.pod_proxy import proxy_prefix, redirect_bare
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.resources.base import ResourceDef


class RelayHandler(SubresourceHandler):
    # the resource whose proxy this is ("pods", "services"): the prefix answers are rewritten under
    resource: ClassVar[str]

    async def upstream_url(self, scope: ResourceScope, request: Request, target: ResourcePath) -> str:
        """The URL the request goes to (StatusError when there is none)."""
        raise NotImplementedError

    async def _relay(self, scope: ResourceScope, request: Request, target: ResourcePath) -> Response:
        if scope.pod_proxy is None:
            raise errors.unavailable(f"this apiserver does not proxy to {self.resource}")
        bare = redirect_bare(request)
        if bare is not None:
            return bare
        url = await self.upstream_url(scope, request, target)
        body = await read_limited(request)  # the apiserver's body limit: 413 past it, never buffered beyond
        prefix = proxy_prefix(target, self.resource)
        return await scope.pod_proxy.relay(request.method, url, request.headers, body, rewrite_prefix=prefix)

    # every verb relays its method as it came
    async def get(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await self._relay(scope, request, target)

    async def create(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await self._relay(scope, request, target)

    async def update(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await self._relay(scope, request, target)

    async def patch(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await self._relay(scope, request, target)

    async def delete(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await self._relay(scope, request, target)

    async def options(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        return await self._relay(scope, request, target)
