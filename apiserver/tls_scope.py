"""Uvicorn protocols that show the app the client's TLS certificate (the ASGI TLS extension).

Uvicorn (0.54) does not put the peer certificate into the ASGI scope, and an ASGI
middleware cannot reach the connection's transport.  The HTTP protocol object can: once
the handshake is done, asyncio calls its `connection_made` with the TLS transport, whose
`ssl_object` holds the certificate the handshake verified.  These subclasses of uvicorn's
own protocols wrap the app of that one connection so that every request on it carries
`scope["extensions"]["tls"]` as the ASGI TLS extension specifies (`client_cert_chain`: PEM
strings, the client's certificate first, empty when it sent none; `client_cert_error`:
None, since a certificate that fails verification fails the handshake).

Pass `protocol_class()` as uvicorn's `http=` and `ws_protocol_class()` as its `ws=`.  Works with
the h11 implementation and, when the httptools package is installed, with that one (both keep
the app in `self.app`).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from uvicorn._types import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, Scope
from uvicorn.protocols.http.h11_impl import H11Protocol

_TLS_VERSIONS = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}


def tls_extension(transport: asyncio.BaseTransport) -> dict[object, object] | None:
    """The ASGI TLS extension for this connection, or None when it is not TLS."""
    ssl_object = transport.get_extra_info("ssl_object")
    if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
        return None
    der = ssl_object.getpeercert(binary_form=True)
    chain = [ssl.DER_cert_to_PEM_cert(der)] if der else []
    version = ssl_object.version()
    return {
        "server_cert": None,
        "client_cert_chain": chain,
        "client_cert_name": None,
        "client_cert_error": None,
        "tls_version": _TLS_VERSIONS.get(version or ""),
        "cipher_suite": None,
    }


def with_tls_scope(app: ASGI3Application, extension: dict[object, object]) -> ASGI3Application:
    """`app`, seeing `extension` as `scope["extensions"]["tls"]` on every request."""

    async def wrapped(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] != "lifespan":
            scope["extensions"] = {**(scope.get("extensions") or {}), "tls": extension}
        await app(scope, receive, send)

    return wrapped


class TLSScopeH11Protocol(H11Protocol):
    """Uvicorn's h11 protocol, with the TLS extension in every request's scope."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        extension = tls_extension(transport)
        if extension is not None:
            self.app = with_tls_scope(self.app, extension)


def protocol_class() -> type[asyncio.Protocol]:
    """Uvicorn's fastest installed HTTP/1.1 protocol (httptools, else h11), with the TLS extension."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # noqa: PLC0415
    except ImportError:
        return TLSScopeH11Protocol

    class TLSScopeHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            extension = tls_extension(transport)
            if extension is not None:
                self.app = with_tls_scope(self.app, extension)

    return TLSScopeHttpToolsProtocol


def ws_protocol_class() -> type[asyncio.Protocol]:
    """Uvicorn's WebSocket protocol (the `websockets` package's sans-I/O one), with the TLS
    extension in every WebSocket scope: exec and port-forward authenticate by certificate too."""
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol  # noqa: PLC0415
    from websockets.server import ServerProtocol  # noqa: PLC0415

    class KubeSubprotocols(ServerProtocol):
        """Leaves the subprotocol to the app.  websockets refuses the whole handshake when an
        offered subprotocol is not an RFC 6455 token, and kubectl's port-forward offers
        `SPDY/3.1+portforward.k8s.io` (a `/` in it); Go's servers take it, so must we."""

        def process_subprotocol(self, headers: Any) -> Any:
            return None  # the app's `accept(subprotocol=...)` names it in the response

    class TLSScopeWebSocketProtocol(WebSocketsSansIOProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.conn = KubeSubprotocols(
                extensions=self.conn.available_extensions, max_size=self.config.ws_max_size, logger=self.conn.logger
            )

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            extension = tls_extension(transport)
            if extension is not None:
                self.app = with_tls_scope(self.app, extension)

    return TLSScopeWebSocketProtocol
