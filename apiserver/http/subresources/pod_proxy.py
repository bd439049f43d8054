"""The `pods/proxy` subresource: each verb relays its HTTP method to the pod
(apiserver.http.pod_proxy says how)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http.handlers.body import read_limited
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.pod_proxy import parse_target, pod_url, proxy_prefix, redirect_bare
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.resources.base import ResourceDef


class PodProxyHandler(SubresourceHandler):
    async def _relay(self, scope: ResourceScope, request: Request, target: ResourcePath) -> Response:
        assert target.name is not None
        if scope.pod_proxy is None:
            raise errors.unavailable("this apiserver does not proxy to pods")
        bare = redirect_bare(request)
        if bare is not None:
            return bare
        where = parse_target(target.name)
        pod = await scope.kubelets().get_pod(target.namespace, where.name)
        url = pod_url(pod, where, target.subpath, request.url.query)
        body = await read_limited(request)  # the apiserver's body limit: 413 past it, never buffered beyond
        prefix = proxy_prefix(target, "pods")
        return await scope.pod_proxy.relay(request.method, url, request.headers, body, rewrite_prefix=prefix)

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
