"""One client connection to one member: requests multiplexed by id, replies dispatched by a
reader task, streams (watch, snapshot) delivered through queues."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from typing import Any

from store.api import methods as M
from store.api.errors import (
    ConnectionLost,
    ProtocolError,
    StoreError,
    TimeoutError_,
    UnavailableError,
    error_from_wire,
)
from store.api.framing import FrameReader, encode_frame
from store.api.protocol import END, ERROR, OK, STREAM, Header, split_url
from store.api.wire import Fields

__all__ = ["Connection", "ConnectionLost"]


def _header(w: Any) -> Header:
    f = Fields(w, "header", 4)
    return Header(f.integer("cluster_id"), f.integer("member_id"), f.integer("revision"), f.integer("raft_term"))


class Connection:
    def __init__(self, endpoint: str, tls: ssl.SSLContext | None = None) -> None:
        self.endpoint = endpoint
        self.tls = tls
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
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host, port, ssl=self.tls, ssl_handshake_timeout=timeout if self.tls is not None else None
                ),
                timeout,
            )
        except ssl.SSLError as e:
            raise UnavailableError(f"TLS with {self.endpoint} failed: {e.reason or e}") from e
        except (TimeoutError, OSError) as e:
            raise UnavailableError(f"cannot connect to {self.endpoint}: {e or type(e).__name__}") from e
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(), name=f"client-{self.endpoint}")
        try:
            header, _ = await self.call(M.HELLO.name, M.HelloRequest().to_wire(), timeout=timeout)
        except ConnectionLost as e:
            # Nothing but the hello was sent: no request's outcome is in doubt.
            await self.close()
            hint = "" if self.tls is not None else " (a TLS port reached without TLS?)"
            raise UnavailableError(f"{self.endpoint} closed the connection during the hello{hint}: {e}") from e
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
        except StoreError as e:
            err = ConnectionLost(f"{self.endpoint} sent a bad frame: {e}")
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self.closed.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(err)
            for cb in list(self._streams.values()):
                cb(ERROR, None, err)
            self._streams.clear()

    def _dispatch(self, f: Any) -> None:
        """One reply frame; a frame that is not a reply is a ProtocolError (the connection ends)."""
        if type(f) is not list or len(f) < 3 or type(f[0]) is not int or f[1] not in (OK, ERROR, STREAM, END):
            raise ProtocolError(f"not a reply frame: {str(f)[:100]}")
        rid, kind = f[0], f[1]
        if kind != ERROR and len(f) != 4:
            raise ProtocolError(f"reply frame for request {rid} has {len(f)} fields, not 4")
        if rid == 0 and kind == ERROR:
            # About the connection, not a request: the member is closing it and says why.
            raise ProtocolError(f"member refused the connection: {error_from_wire(f[2])}")
        stream = self._streams.get(rid)
        if stream is not None:
            if kind == ERROR:
                self._streams.pop(rid, None)
                stream(ERROR, None, error_from_wire(f[2]))
            else:
                if kind == END:
                    self._streams.pop(rid, None)
                stream(kind, _header(f[2]), f[3])
            return
        fut = self._pending.get(rid)
        if fut is None or fut.done():
            return
        if kind == OK:
            fut.set_result((_header(f[2]), f[3]))
        elif kind == ERROR:
            fut.set_exception(error_from_wire(f[2]))
        else:
            fut.set_exception(ProtocolError(f"unexpected stream frame for request {rid}"))

    def abort(self) -> None:
        """Close the socket and stop the reader now, without waiting: done synchronously so
        that a caller cancelled while closing still leaves no socket or task behind.  An
        abort, not a close: a TLS close waits for the member's close_notify (up to 30 s
        when the member is slow to answer), which a client going away has no use for."""
        if self.writer is not None:
            self.writer.transport.abort()
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
