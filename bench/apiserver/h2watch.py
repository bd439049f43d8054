"""Watches over HTTP/2 for the load generators: many streams on one TLS connection, as one
client-go process holds its informers' watches (`raftkube bench apiserver --http2`).

The frames are the `h2` package's (python-hyper, client side; a bench and test dependency,
never the product's): an HTTP/2 client nobody here wrote, against both apiservers.  Windows are
opened wide (4 MiB a stream, 1 GiB the connection, as Go's transport does) and given back as
soon as bytes arrive, so the client never throttles the server it measures.  A connection
carries at most `STREAMS_PER_CONNECTION` watches, and never more than the server's
SETTINGS_MAX_CONCURRENT_STREAMS (kube-apiserver 1.33 advertises 100 to this client): Go's
transport opens another connection when a server's limit is reached; `H2WatchPool` does the
same.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

from bench.apiserver.http11 import HTTPError, Target

STREAMS_PER_CONNECTION = 200
STREAM_WINDOW = 4 << 20
CONNECTION_WINDOW = 1 << 30


@dataclass
class _Watch:
    on_data: Callable[[bytes], None]
    on_end: Callable[[str], None]
    answered: asyncio.Future[int]


@dataclass
class H2Connection:
    """One HTTP/2 connection carrying watches; `open_watch` returns once the 200 came."""

    target: Target
    ctx: ssl.SSLContext
    conn: h2.connection.H2Connection = field(init=False)
    writer: asyncio.StreamWriter | None = None
    watches: dict[int, _Watch] = field(default_factory=dict)
    reader_task: asyncio.Task[None] | None = None
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the server's first SETTINGS came: its stream limit is known from then on."""

    @property
    def capacity(self) -> int:
        """Watches this connection may carry: ours and the server's limit, the smaller."""
        return min(STREAMS_PER_CONNECTION, self.conn.remote_settings.max_concurrent_streams)

    async def open(self, timeout: float = 30.0) -> None:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(self.target.host, self.target.port, ssl=self.ctx, limit=2**20), timeout
        )
        self.writer = writer
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is None or ssl_object.selected_alpn_protocol() != "h2":
            raise HTTPError("the server did not take HTTP/2 (ALPN h2)")
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.conn.local_settings = h2.settings.Settings(
            client=True,
            initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW},
        )
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(CONNECTION_WINDOW - 65_535)
        self._flush()
        self.reader_task = asyncio.create_task(self._read(reader))
        await asyncio.wait_for(self.settled.wait(), timeout)

    async def open_watch(self, path: str, on_data: Callable[[bytes], None], on_end: Callable[[str], None]) -> None:
        sid = self.conn.get_next_available_stream_id()
        answered: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.watches[sid] = _Watch(on_data, on_end, answered)
        headers = [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":path", path.encode()),
            (b":authority", f"{self.target.host}:{self.target.port}".encode()),
            (b"authorization", f"Bearer {self.target.token}".encode()),
            (b"accept", b"application/json"),
        ]
        self.conn.send_headers(sid, headers, end_stream=True)
        self._flush()
        status = await asyncio.wait_for(answered, 30.0)
        if status != 200:
            raise HTTPError(f"GET {path}: {status}")

    async def close(self) -> None:
        if self.reader_task is not None:
            self.reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.reader_task
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
                await asyncio.wait_for(self.writer.wait_closed(), 1.0)
            self.writer = None

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data and self.writer is not None:
            self.writer.write(data)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        why = "the server closed the connection"
        try:
            while data := await reader.read(1 << 18):
                for event in self.conn.receive_data(data):
                    self._event(event)
                self._flush()
        except (OSError, h2.exceptions.ProtocolError, ssl.SSLError) as e:
            why = f"{type(e).__name__}: {e}"
        for w in self.watches.values():
            if not w.answered.done():
                w.answered.set_exception(HTTPError(why))
            w.on_end(why)
        self.watches.clear()

    def _event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RemoteSettingsChanged):
            self.settled.set()
        elif isinstance(event, h2.events.ResponseReceived):
            w = self.watches.get(event.stream_id)
            status = dict(event.headers or []).get(b":status", b"0")
            if w is not None and not w.answered.done():
                w.answered.set_result(int(status))
        elif isinstance(event, h2.events.DataReceived):
            self.conn.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id)
            w = self.watches.get(event.stream_id)
            if w is not None and event.data:
                w.on_data(event.data)
        elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
            w = self.watches.pop(event.stream_id, None)
            if w is not None:
                if not w.answered.done():
                    w.answered.set_exception(HTTPError(f"stream ended before its answer: {event}"))
                w.on_end(f"stream {event.stream_id} ended by the server ({type(event).__name__})")


@dataclass
class H2WatchPool:
    """Watches spread over as few HTTP/2 connections as the per-connection stream cap allows."""

    target: Target
    ctx: ssl.SSLContext
    connections: list[H2Connection] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def open_watch(self, path: str, on_data: Callable[[bytes], None], on_end: Callable[[str], None]) -> None:
        async with self._lock:
            conn = self.connections[-1] if self.connections else None
            if conn is None or len(conn.watches) >= conn.capacity:
                conn = H2Connection(self.target, self.ctx)
                await conn.open()
                self.connections.append(conn)
        await conn.open_watch(path, on_data, on_end)

    async def close(self) -> None:
        for conn in self.connections:
            await conn.close()


def h2_context(target: Target) -> ssl.SSLContext:
    """The target's TLS context offering only h2 (a server without HTTP/2 fails the watch)."""
    ctx = target.ssl_context()
    ctx.set_alpn_protocols(["h2"])
    return ctx
