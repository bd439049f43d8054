"""A raw client connection: sends whatever frames a test makes (no typed client in the way)
and reads the member's replies as they come."""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

from store.api.framing import FrameReader, encode_frame
from store.api.protocol import PROTOCOL, split_url


class RawConn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.frames = FrameReader(reader)
        self._buffered: list[Any] = []

    @classmethod
    async def open(
        cls, url: str, tls: ssl.SSLContext | None, hello: bool = True, receive_buffer: int | None = None
    ) -> RawConn:
        """`receive_buffer` sets the socket's SO_RCVBUF before it connects: a client that stops
        reading then lets the member's kernel take little of what it sends, so what the member
        keeps for it (its own backlog) is what a test measures, not the kernel's autotuned share."""
        host, port = split_url(url)
        if receive_buffer is None:
            opening = asyncio.open_connection(host, port, ssl=tls)
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            sock.setblocking(False)
            try:
                await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (host, port)), 5)
            except BaseException:
                sock.close()
                raise
            opening = asyncio.open_connection(sock=sock, ssl=tls, server_hostname=host if tls else None)
        reader, writer = await asyncio.wait_for(opening, 5)
        conn = cls(reader, writer)
        if hello:
            reply = await conn.call(0, "hello", [PROTOCOL])
            assert reply[1] == 0, reply
        return conn

    def send(self, frame: Any) -> None:
        self.writer.write(encode_frame(frame))

    def send_bytes(self, data: bytes) -> None:
        self.writer.write(data)

    async def next(self, timeout: float = 5.0) -> Any:
        """The next reply frame; None at EOF (the member closed the connection)."""
        if not self._buffered:
            got = await asyncio.wait_for(self.frames.frames(), timeout)
            if not got:
                return None
            self._buffered = got
        return self._buffered.pop(0)

    async def call(self, rid: int, method: Any, args: Any, timeout: float = 5.0) -> Any:
        """Send one request and return the first frame that answers `rid`."""
        self.send([rid, method, args])
        while True:
            f = await self.next(timeout)
            if f is None or f[0] == rid or (f[0] == 0 and f[1] == 1):
                return f

    def close(self) -> None:
        self.writer.transport.abort()
