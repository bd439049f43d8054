"""The subresources that end on a kubelet (kube's log, exec, attach, portforward and proxy
connecters): `pods/log` streamed through (or read out over a WebSocket, as kube's
StreamObject does for an upgrade request), `pods/exec`, `pods/attach` and `pods/portforward`
relayed as WebSocket sessions once admission has let the CONNECT through (its object is the
request's options: a webhook may refuse an exec), `nodes/proxy` streamed through.  How the kubelet is reached is
`apiserver.http.kubelet_proxy`; these say which of its calls a subresource is (a stream
handler carries the kubelet path it reaches)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest
from apiserver.http import wsstream
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.kubelet_proxy import StreamEndpoint
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.http.wsstream import WebSocketSession
from apiserver.request_context import current_user
from apiserver.resources.base import ResourceDef


class PodLogHandler(SubresourceHandler):
    """A GET streams the log; a WebSocket reads it out as messages (conformance "Pods should
    support retrieving logs from the container over websockets"), authorized as that GET."""

    streams: ClassVar[bool] = True

    async def get(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        assert target.name is not None
        return await scope.kubelets().pod_log(target.namespace, target.name, request.query_params)

    async def open_stream(
        self, scope: ResourceScope, target: ResourcePath, query: list[tuple[str, str]], protocols: Sequence[str]
    ) -> WebSocketSession:
        assert target.name is not None
        chosen = wsstream.reader_protocol(protocols)  # before the kubelet is asked for anything
        opened = await scope.kubelets().pod_log_stream(target.namespace, target.name, dict(query))
        return wsstream.ByteStream(chosen, opened[1] if opened is not None else _nothing())


async def _nothing() -> AsyncGenerator[bytes, None]:
    """The log of a pod without a node: nothing yet (a plain GET answers 204; kube's answers
    an upgrade so too, which a client sees as a failed handshake, where ours opens and closes)."""
    logged: tuple[bytes, ...] = ()
    for chunk in logged:
        yield chunk


@dataclass(frozen=True, eq=False)
class PodStreamHandler(SubresourceHandler):
    """exec, attach and portforward: WebSocket sessions; a plain request only learns why it failed."""

    streams: ClassVar[bool] = True
    # the kubelet call a session is (kubelet_proxy.EXEC, PORT_FORWARD)
    endpoint: StreamEndpoint

    async def get(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        raise errors.bad_request("Upgrade request required")  # kube's answer to a plain GET

    async def create(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        # kubectl's SPDY retry after a refused WebSocket: it gets what the WebSocket got
        assert target.name is not None and target.subresource is not None
        access = scope.kubelets()
        user = getattr(request.state, "user", None)
        failed = access.failed_upgrades.recall(user.name if user else "", request.url.path, request.url.query)
        if failed is not None:
            raise failed
        await access.check_stream(target.namespace, target.name, self.endpoint, request.query_params.multi_items())
        raise errors.bad_request(
            f"{res.plural}/{target.subresource} is served over WebSocket only (kubectl 1.31 or newer); "
            "this server does not upgrade to SPDY"
        )

    async def open_stream(
        self, scope: ResourceScope, target: ResourcePath, query: list[tuple[str, str]], protocols: Sequence[str]
    ) -> WebSocketSession:
        assert target.name is not None and target.subresource is not None
        access = scope.kubelets()
        options = await access.check_stream(target.namespace, target.name, self.endpoint, query)
        await _admit_connect(scope, target, options)
        return await access.pod_stream(target.namespace, target.name, self.endpoint, query, list(protocols))


async def _admit_connect(scope: ResourceScope, target: ResourcePath, options: dict[str, object]) -> None:
    """Admission of a CONNECT (kube's connect handler admits, then validates, the options)."""
    assert target.name is not None and target.subresource is not None
    resource = scope.by_path[(target.group, target.version, target.resource)]
    chain = scope.registries[resource].admission
    request = AdmissionRequest(
        "CONNECT", resource, target.subresource, target.namespace, target.name, current_user(), options, None
    )
    await chain.admit(request)
    await chain.validate(request)


class NodeProxyHandler(SubresourceHandler):
    async def get(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        assert target.name is not None
        return await scope.kubelets().node_proxy(target.name, target.subpath, request.url.query)
