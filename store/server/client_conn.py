"""One client connection as the member sees it: its socket, the watches it owns, and how
much it has not read yet."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from store.api.watch import WatchResponse
from store.server.watch_frames import WatchFrameEncoder

TLS_CHUNK = 64 << 10
"""Bytes written to a TLS transport at a time.  asyncio encrypts all of one write into an
OpenSSL memory buffer before passing it on, and that buffer keeps its largest size for the
connection's life: one 4 MiB write used to leave every connection that once received one
holding 5 MiB (bench/store_slow_flood.py: 101 such connections, over 1 GiB)."""
RAW_HIGH_WATER = 8 << 20
"""Under TLS, what the socket's transport takes before it pushes back.  Above the member's
own pause thresholds (4 MiB) so that it does not push back in their stead: once it does,
asyncio keeps what follows in the TLS buffer, whose size is never given back."""
TLS_HIGH_WATER = 64 << 10
"""Under TLS, what may wait in the TLS buffer before writers are asked to wait (drain)."""


def limit_tls_buffers(raw: asyncio.WriteTransport, tls: asyncio.WriteTransport) -> None:
    """Set the write buffer limits of a TLS connection as the constants above say."""
    raw.set_write_buffer_limits(high=RAW_HIGH_WATER)
    tls.set_write_buffer_limits(high=TLS_HIGH_WATER)


@dataclass(eq=False)
class ClientConn:
    writer: asyncio.StreamWriter
    raw: asyncio.WriteTransport | None = None
    """The TCP transport under TLS (None without TLS): what TLS has encrypted but the socket
    has not taken waits there, outside the TLS transport's own count."""
    watches: dict[int, int] = field(default_factory=dict)
    """watch_id -> the request id of the watch stream it answers on this connection."""
    closed: bool = False

    @property
    def peer(self) -> str:
        """The client's address, for the log."""
        name = self.writer.get_extra_info("peername")
        return f"{name[0]}:{name[1]}" if isinstance(name, tuple) and len(name) >= 2 else str(name)

    def token(self, resp: WatchResponse) -> int | None:
        return self.watches.get(resp.watch_id)

    def frame_encoder(self, header: list[int]) -> WatchFrameEncoder:
        return WatchFrameEncoder(header)

    def connection_watches(self) -> int:
        return len(self.watches)

    def backlog(self) -> int:
        """Bytes written to the connection that the client has not taken yet (all of them:
        under TLS, those waiting to be encrypted, encrypted, and waiting for the socket)."""
        transport = self.writer.transport
        size = transport.get_write_buffer_size()
        raw = self.raw
        if raw is not None and raw is not transport:
            size += raw.get_write_buffer_size()
        return size

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        if self.raw is None or len(data) <= TLS_CHUNK:
            self.writer.write(data)
            return
        # Under TLS, in slices: each is encrypted and handed to the socket's transport before
        # the next, so the TLS buffer never holds more than one (see TLS_CHUNK).
        view = memoryview(data)
        for off in range(0, len(data), TLS_CHUNK):
            self.writer.write(view[off : off + TLS_CHUNK])

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
