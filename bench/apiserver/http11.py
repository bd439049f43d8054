"""A minimal HTTP/1.1 client over asyncio TLS streams, for the load generators.

One keep-alive connection per `Connection`: requests on it go one after the other (HTTP/1.1
has no multiplexing), so a load generator opens one per request in flight, and one per watch.
It only speaks what the apiserver answers: Content-Length or chunked bodies, no redirects,
no compression.  It exists because it costs the client less CPU per request than httpx (the
benchmark's `client` phase measures both and reports the figures), and the load generators
share the machine with the servers they measure.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

MAX_HEAD = 64 * 1024
"""Bytes a response's status line and headers may take before the answer is refused."""


class HTTPError(Exception):
    """The server closed the connection, or answered something this client cannot parse."""


@dataclass(frozen=True)
class Target:
    """Where the apiserver is and how to authenticate: a bearer token, TLS verified by `ca`."""

    host: str
    port: int
    ca: str
    token: str
    cert: str = ""
    key: str = ""

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca)
        if self.cert:
            ctx.load_cert_chain(self.cert, self.key)
        return ctx

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def to_json(self) -> dict[str, str | int]:
        return {
            "host": self.host,
            "port": self.port,
            "ca": self.ca,
            "token": self.token,
            "cert": self.cert,
            "key": self.key,
        }

    @staticmethod
    def from_json(doc: dict[str, str | int]) -> Target:
        return Target(
            str(doc["host"]),
            int(doc["port"]),
            str(doc["ca"]),
            str(doc["token"]),
            str(doc.get("cert", "")),
            str(doc.get("key", "")),
        )


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes = b""


@dataclass
class Connection:
    """One keep-alive TLS connection; `request` and `stream` are not to be used concurrently."""

    target: Target
    ctx: ssl.SSLContext
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    _prefix: bytes = field(init=False, default=b"")

    def __post_init__(self) -> None:
        self._prefix = (
            f"Host: {self.target.host}:{self.target.port}\r\nAuthorization: Bearer {self.target.token}\r\n".encode()
        )

    async def open(self, timeout: float = 10.0) -> None:
        self.reader, self.writer = await asyncio.wait_for(
            asyncio.open_connection(self.target.host, self.target.port, ssl=self.ctx, limit=2**20), timeout
        )

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
                await asyncio.wait_for(self.writer.wait_closed(), 1.0)
            self.writer = self.reader = None

    def _send(self, method: str, path: str, body: bytes | None) -> None:
        assert self.writer is not None
        head = f"{method} {path} HTTP/1.1\r\n".encode() + self._prefix
        if body is not None:
            head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        self.writer.write(head + b"Accept: application/json\r\n\r\n" + (body or b""))

    async def _head(self) -> tuple[int, dict[str, str]]:
        assert self.reader is not None
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            raise HTTPError("connection closed before a response") from e
        except asyncio.LimitOverrunError as e:
            raise HTTPError("response headers too long") from e
        lines = raw.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError) as e:
            raise HTTPError(f"bad status line {lines[0]!r}") from e
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        return status, headers

    async def request(self, method: str, path: str, body: bytes | None = None) -> Response:
        """Send one request and read the whole response (reconnecting first if needed)."""
        if self.writer is None:
            await self.open()
        self._send(method, path, body)
        status, headers = await self._head()
        assert self.reader is not None
        if "content-length" in headers:
            data = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            data = b"".join([c async for c in self._chunks()])
        else:
            data = await self.reader.read()
            await self.close()
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return Response(status, headers, data)

    async def _chunks(self) -> AsyncIterator[bytes]:
        reader = self.reader
        assert reader is not None
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers from the apiserver
                return
            chunk = await reader.readexactly(size + 2)
            yield chunk[:-2]

    async def open_stream(self, path: str) -> None:
        """GET `path` and read the response head; HTTPError unless it is 200 (with the body's start).
        Then `lines()` or `chunks()` reads the body (a watch: one JSON event a line)."""
        if self.writer is None:
            await self.open()
        self._send("GET", path, None)
        status, headers = await self._head()
        if status != 200:
            r = await self._rest(headers)
            raise HTTPError(f"GET {path}: {status} {r[:300]!r}")
        if headers.get("transfer-encoding", "").lower() != "chunked":
            raise HTTPError(f"GET {path}: expected a chunked stream, got headers {headers}")

    def chunks(self) -> AsyncIterator[bytes]:
        """The stream's chunks as they arrive (the apiserver writes whole event lines)."""
        return self._chunks()

    async def lines(self) -> AsyncIterator[bytes]:
        """The stream's lines, each with its newline, however the chunks split them."""
        pending = b""
        async for chunk in self._chunks():
            if pending:
                chunk = pending + chunk
            if chunk.endswith(b"\n") and chunk.count(b"\n") == 1:
                pending = b""
                yield chunk
                continue
            *lines, pending = chunk.split(b"\n")
            for line in lines:
                yield line + b"\n"

    async def _rest(self, headers: dict[str, str]) -> bytes:
        assert self.reader is not None
        if "content-length" in headers:
            return await self.reader.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return b"".join([c async for c in self._chunks()])
        return b""
