"""One client connection to one member: requests multiplexed by id, replies dispatched by a
reader task, streams (watch, snapshot) delivered through queues."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from store.api.errors import ProtocolError, StoreError, TimeoutError_, UnavailableError, error_from_wire
from store.server.framing import FrameReader, encode_frame
from store.server.protocol import END, ERROR, OK, PROTOCOL, STREAM, Header, split_url


class ConnectionLost(UnavailableError):
    """The connection closed with this request possibly delivered: a write's outcome is unknown."""


class Connection:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[tuple[Header, Any]]] = {}
        self._streams: dict[int, Callable[[int, Header | None, Any], None]] = {}
        self._reader_task: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()
        self.hello: Header | None = None

    async def open(self, timeout: float) -> None:
        host, port = split_url(self.endpoint)
        try:
            self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (TimeoutError, OSError) as e:
            raise UnavailableError(f"cannot connect to {self.endpoint}: {e or type(e).__name__}") from e
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(), name=f"client-{self.endpoint}")
        try:
            header, _ = await self.call("hello", [PROTOCOL], timeout=timeout)
        except BaseException:
            # Accepted but unanswered (a partitioned member): do not leak the socket.
            await self.close()
            raise
        self.hello = header

    @property
    def is_open(self) -> bool:
        return self.writer is not None and not self.closed.is_set()

    def _send(self, rid: int, method: str, args: Any) -> None:
        if self.writer is None or self.closed.is_set():
            raise UnavailableError(f"connection to {self.endpoint} is closed")
        self.writer.write(encode_frame([rid, method, args]))

    async def call(self, method: str, args: Any, timeout: float) -> tuple[Header, Any]:
        rid = self._next_id
        self._next_id += 1
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[Header, Any]] = loop.create_future()
        self._pending[rid] = fut
        # A plain timer rather than asyncio.wait_for: this runs once per request.
        timer = loop.call_later(timeout, self._expire, fut, method, timeout)
        try:
            self._send(rid, method, args)
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(rid, None)

    def _expire(self, fut: asyncio.Future[tuple[Header, Any]], method: str, timeout: float) -> None:
        if not fut.done():
            fut.set_exception(TimeoutError_(f"{method} to {self.endpoint} timed out after {timeout:.1f}s"))

    def open_stream(self, method: str, args: Any, on_frame: Callable[[int, Header | None, Any], None]) -> int:
        """Start a streaming request; `on_frame(kind, header, payload)` gets every frame for it."""
        rid = self._next_id
        self._next_id += 1
        self._streams[rid] = on_frame
        self._send(rid, method, args)
        return rid

    def close_stream(self, rid: int) -> None:
        self._streams.pop(rid, None)

    async def _read_loop(self) -> None:
        assert self.reader is not None
        frames = FrameReader(self.reader)
        err: StoreError = ConnectionLost(f"connection to {self.endpoint} lost")
        try:
            while True:
                batch = await frames.frames()
                if not batch:
                    break
                for f in batch:
                    self._dispatch(f)
        except ProtocolError as e:
            err = ConnectionLost(f"{self.endpoint} sent a bad frame: {e}")
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(err)
            for cb in list(self._streams.values()):
                cb(ERROR, None, err)
            self._streams.clear()

    def _dispatch(self, f: list[Any]) -> None:
        rid, kind = f[0], f[1]
        stream = self._streams.get(rid)
        if stream is not None:
            if kind == ERROR:
                self._streams.pop(rid, None)
                stream(ERROR, None, error_from_wire(f[2]))
            else:
                if kind == END:
                    self._streams.pop(rid, None)
                stream(kind, Header.from_wire(f[2]), f[3])
            return
        fut = self._pending.get(rid)
        if fut is None or fut.done():
            return
        if kind == OK:
            fut.set_result((Header.from_wire(f[2]), f[3]))
        elif kind == ERROR:
            fut.set_exception(error_from_wire(f[2]))
        elif kind in (STREAM, END):
            fut.set_exception(ProtocolError(f"unexpected stream frame for request {rid}"))

    def abort(self) -> None:
        """Close the socket and stop the reader now, without waiting: done synchronously so
        that a caller cancelled while closing still leaves no socket or task behind."""
        if self.writer is not None:
            self.writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()

    async def close(self) -> None:
        self.abort()
        if self.writer is not None:
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        if self._reader_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
        self.closed.set()
