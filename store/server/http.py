"""A minimal HTTP/1.1 endpoint for /health and /metrics.

Two read-only GET routes do not justify a web framework in every member process; this is
enough for curl, Prometheus and the launcher's readiness checks.  Anything else gets a
4xx and the connection is closed.

Test-only, when `RAFTKUBE_FAILPOINTS_HTTP=1` (store/failpoints.py): a chaos harness sets
failpoints at runtime.  Without it these paths answer 404 like any unknown path.

    GET    /debug/failpoints          {"<name>": {"action": "off", "hits": 0}, ...}
    PUT    /debug/failpoints/<name>   body: an action (crash, 2*crash, sleep(500), off)
    DELETE /debug/failpoints/<name>   turn it off
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

from store import failpoints

HealthFn = Callable[[], tuple[bool, dict[str, Any]]]
MetricsFn = Callable[[], str]

FAILPOINTS_PATH = "/debug/failpoints"
MAX_BODY = 1024


class HttpEndpoint:
    def __init__(self, health: HealthFn, metrics: MetricsFn) -> None:
        self.health = health
        self.metrics = metrics
        self.server: asyncio.Server | None = None

    async def listen(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5.0)
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                await self._respond(writer, 400, "text/plain", b"bad request\n")
                return
            method, target = parts[0], parts[1].split("?", 1)[0]
            if target == FAILPOINTS_PATH or target.startswith(FAILPOINTS_PATH + "/"):
                if not failpoints.HTTP_ENABLED:
                    await self._respond(writer, 404, "text/plain", b"not found: try /health or /metrics\n")
                    return
                status, body = await self._failpoints(method, target, head, reader)
                await self._respond(writer, status, "application/json", body)
            elif method != "GET":
                await self._respond(writer, 405, "text/plain", b"only GET is supported\n")
            elif target == "/health":
                ok, detail = self.health()
                body = json.dumps({"health": "true" if ok else "false", **detail}).encode() + b"\n"
                await self._respond(writer, 200 if ok else 503, "application/json", body)
            elif target == "/metrics":
                await self._respond(writer, 200, "text/plain; version=0.0.4", self.metrics().encode())
            else:
                await self._respond(writer, 404, "text/plain", b"not found: try /health or /metrics\n")
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _failpoints(method: str, target: str, head: bytes, reader: asyncio.StreamReader) -> tuple[int, bytes]:
        """Serve the failpoint routes: (status, JSON body)."""
        name = target[len(FAILPOINTS_PATH) + 1 :]
        try:
            if method == "GET" and not name:
                return 200, _json(failpoints.status())
            if not name or method not in ("PUT", "DELETE"):
                return 405, _json({"error": "use GET /debug/failpoints, PUT or DELETE /debug/failpoints/<name>"})
            if method == "DELETE":
                failpoints.clear(name)
            else:
                failpoints.set_action(name, (await _read_body(head, reader)).decode("utf-8", "replace"))
        except failpoints.FailpointError as e:
            return (404 if isinstance(e, failpoints.UnknownFailpointError) else 400), _json({"error": str(e)})
        return 200, _json({name: failpoints.status()[name]})

    @staticmethod
    async def _respond(writer: asyncio.StreamWriter, status: int, ctype: str, body: bytes) -> None:
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            405: "Method Not Allowed",
            503: "Service Unavailable",
        }
        writer.write(
            f"HTTP/1.1 {status} {reason.get(status, '')}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()


def _json(doc: object) -> bytes:
    return json.dumps(doc).encode() + b"\n"


async def _read_body(head: bytes, reader: asyncio.StreamReader) -> bytes:
    """The request body as its Content-Length says (small bodies only)."""
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length":
            try:
                length = int(value.strip() or 0)
            except ValueError:
                raise failpoints.FailpointError(f"bad Content-Length {value.strip()!r}") from None
    if length > MAX_BODY:
        raise failpoints.FailpointError(f"a failpoint action is at most {MAX_BODY} bytes, got {length}")
    return await asyncio.wait_for(reader.readexactly(length), timeout=5.0) if length else b""


def render_metrics(samples: list[tuple[str, str, str, float]]) -> str:
    """Prometheus text format from (name, type, help, value) tuples."""
    out = []
    for name, kind, help_text, value in samples:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.append(f"{name} {value:.6g}" if isinstance(value, float) else f"{name} {value}")
    return "\n".join(out) + "\n"
