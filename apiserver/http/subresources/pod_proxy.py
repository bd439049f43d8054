"""The `pods/proxy` subresource: each verb relays its HTTP method to the pod
(apiserver.http.pod_proxy says how; subresources.relay what every relay shares)."""

from __future__ import annotations

from typing import ClassVar

from starlette.requests import Request

from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.pod_proxy import parse_target, pod_url
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.relay import RelayHandler


class PodProxyHandler(RelayHandler):
    resource: ClassVar[str] = "pods"

    async def upstream_url(self, scope: ResourceScope, request: Request, target: ResourcePath) -> str:
        assert target.name is not None
        where = parse_target(target.name)
        pod = await scope.kubelets().get_pod(target.namespace, where.name)
        return pod_url(pod, where, target.subpath, request.url.query)
