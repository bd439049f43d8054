"""What a WebSocket request to the API becomes once it is checked: a session that names the
subprotocol it accepts with and then serves the accepted socket.

The app's one WebSocket route authenticates, authorizes and asks the subresource for its
session; a refusal is an HTTP Status before any upgrade.  Two kinds of session exist:
exec and port-forward relay the kubelet's own WebSocket message by message
(`kubelet_proxy.Relayed`), and `pods/log` reads a byte stream out as messages (`ByteStream`,
kube's wsstream.Reader): a binary message per chunk under `binary.k8s.io` (or when the client
offers no subprotocol), a text message of the chunk in base64 under `base64.binary.k8s.io`,
one empty message first (kube's "ping", so a client knows the stream is open before anything
is logged), and a close when the stream ends.  Whatever the client sends is read and dropped;
its close ends the stream, so a followed log stops when its reader leaves.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Protocol

from starlette.websockets import WebSocket

from apiserver import errors
from machinery.tasks import until_first_ends

BINARY = "binary.k8s.io"
BASE64 = "base64.binary.k8s.io"
# kube's NewDefaultReaderProtocols: subprotocol -> whether its messages are base64 text
READER_PROTOCOLS = {"": False, BINARY: False, BASE64: True}


class WebSocketSession(Protocol):
    @property
    def protocol(self) -> str | None:
        """The subprotocol the upgrade is accepted with (None: no Sec-WebSocket-Protocol)."""
        ...

    async def serve(self, websocket: WebSocket) -> None:
        """Use the accepted socket until either side is done, and close it."""
        ...


def reader_protocol(offered: Sequence[str]) -> str:
    """The first subprotocol the client offers that a byte stream speaks ("" when it offers
    none); 403 in kube's words when it offers only others (golang.org/x/net/websocket's
    answer to a refused handshake)."""
    for protocol in offered or ("",):
        if protocol in READER_PROTOCOLS:
            return protocol
    supported = " ".join(READER_PROTOCOLS)
    raise errors.StatusError(
        403, "Forbidden", f"requested protocol(s) are not supported: [{' '.join(offered)}]; supports [{supported}]"
    )


@dataclass(eq=False)
class ByteStream:
    """A byte stream (a container's log) sent as WebSocket messages in `protocol`'s framing."""

    # one of READER_PROTOCOLS, as `reader_protocol` chose it
    chosen: str
    body: AsyncGenerator[bytes, None]

    @property
    def protocol(self) -> str | None:
        return self.chosen or None

    async def serve(self, websocket: WebSocket) -> None:
        encode = READER_PROTOCOLS[self.chosen]

        async def send() -> None:
            await (websocket.send_text("") if encode else websocket.send_bytes(b""))
            async for chunk in self.body:
                if not chunk:
                    continue
                if encode:
                    await websocket.send_text(base64.b64encode(chunk).decode("ascii"))
                else:
                    await websocket.send_bytes(chunk)

        async def until_closed() -> None:
            while (await websocket.receive())["type"] != "websocket.disconnect":
                pass

        try:
            await until_first_ends(send(), until_closed())
        finally:
            with contextlib.suppress(Exception):
                await self.body.aclose()  # the kubelet's response goes back to the pool
            with contextlib.suppress(Exception):
                await websocket.close(1000)
