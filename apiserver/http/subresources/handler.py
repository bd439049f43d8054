"""What a subresource handler is: one method per HTTP verb it serves.

The router calls the method of the request's verb only after checking that verb against the
subresource's declared `verbs` (what discovery lists); a handler implements those and
inherits a 405 for the rest.  Stream subresources (exec, portforward, log) also open WebSocket
sessions (`wsstream.WebSocketSession`), which the app's WebSocket route asks for only when
`streams` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http.requestinfo import ResourcePath
from apiserver.resources.base import ResourceDef

if TYPE_CHECKING:
    from apiserver.http.handlers.scope import ResourceScope
    from apiserver.http.wsstream import WebSocketSession


class SubresourceHandler:
    """The default of every verb: not served (405), as kube says when a storage lacks the verb."""

    # True: `open_stream` opens a WebSocket session (exec, port-forward, log)
    streams: ClassVar[bool] = False

    async def get(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        raise _not_supported(request, res)

    async def create(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        raise _not_supported(request, res)

    async def update(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        raise _not_supported(request, res)

    async def patch(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        raise _not_supported(request, res)

    async def delete(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        raise _not_supported(request, res)

    async def options(self, scope: ResourceScope, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        """OPTIONS (authorized as `get`): only relaying subresources (proxy) serve it."""
        raise _not_supported(request, res)

    async def open_stream(
        self, scope: ResourceScope, target: ResourcePath, query: list[tuple[str, str]], protocols: Sequence[str]
    ) -> WebSocketSession:
        raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")


def _not_supported(request: Request, res: ResourceDef) -> errors.StatusError:
    return errors.method_not_allowed(f"{request.method} is not supported on {res.plural}")
