"""One client connection as the member sees it: its socket, the watches it owns, and how
much it has not read yet."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass(eq=False)
class ClientConn:
    writer: asyncio.StreamWriter
    watches: dict[int, int] = field(default_factory=dict)
    """watch_id -> the request id of the watch stream it answers on this connection."""
    closed: bool = False

    def backlog(self) -> int:
        """Bytes written to the connection that the client has not taken yet."""
        transport = self.writer.transport
        return transport.get_write_buffer_size() if transport is not None else 0

    def send(self, data: bytes) -> None:
        if not self.closed:
            self.writer.write(data)

    def abort(self) -> None:
        """Close now and drop whatever is unsent (a plain close would keep the unsent bytes,
        and the socket, until a client that does not read takes them)."""
        self.closed = True
        transport = self.writer.transport
        if transport is not None:
            transport.abort()

    def close(self) -> None:
        self.closed = True
        self.writer.close()
