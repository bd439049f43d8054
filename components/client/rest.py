"""The async REST client every component uses: one pooled HTTPS session, JSON through orjson.

A non-2xx answer raises an `ApiError` subclass chosen by the `Status` reason the server sent
(NotFound, AlreadyExists, Conflict, Gone/Expired, ...), so callers branch on types instead of
numbers.  A connection that cannot be made, or breaks, raises `TransportError`.  Watches are
newline-delimited JSON streams cut into events here, with a bound on one event's size.

Failover: a config naming several apiservers (ClientConfig.endpoints, an HA control plane)
dials one at a time.  A request whose connection could not be made (refused, no route, TLS
handshake timed out) was never sent, so it goes to the next apiserver at once, whatever its
method; a connection that breaks or times out after the request went out raises
TransportError as before (a write may have been applied: only the caller can tell), and the
client's next request goes to the next apiserver.  All apiservers share one store, so a
resourceVersion from one is good at another (a watch cache behind it waits, as kube's does).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

from components.client.connector import TrackedConnector
from components.client.kubeconfig import ClientConfig
from machinery.objects import Obj

Params = Mapping[str, str | int | bool]
EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})
MAX_EVENT_BYTES = 64 * 1024 * 1024  # one watch event (the apiserver caps request bodies far below)
MAX_BODY_BYTES = 512 * 1024 * 1024  # one LIST answer
DEFAULT_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 5.0
"""How long making a connection (TCP and TLS; not the wait for a pooled one) may take before the
next apiserver is tried: a stopped apiserver's kernel still accepts, only the TLS handshake
shows it is gone."""
CLOSE_TIMEOUT_S = 5.0
"""How long `close()` waits for its connections' TLS shutdowns before it aborts them."""


class TransportError(Exception):
    """The apiserver could not be reached, or the connection broke mid-answer."""


class ApiError(Exception):
    """The apiserver answered with a failure `Status`."""

    def __init__(self, code: int, reason: str, message: str, status: Obj | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or {}

    @property
    def retry_after(self) -> float | None:
        """Seconds the server asked us to wait (details.retryAfterSeconds), when it did."""
        details = self.status.get("details")
        seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
        return float(seconds) if isinstance(seconds, int | float) and seconds >= 0 else None


class BadRequestError(ApiError): ...


class UnauthorizedError(ApiError): ...


class ForbiddenError(ApiError): ...


class NotFoundError(ApiError): ...


class AlreadyExistsError(ApiError): ...


class ConflictError(ApiError): ...


class GoneError(ApiError):
    """410: the resourceVersion asked for is compacted away (reason Expired or Gone): re-list."""


class InvalidError(ApiError): ...


class TooManyRequestsError(ApiError): ...


class ServerError(ApiError): ...


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequestError,
    "Unauthorized": UnauthorizedError,
    "Forbidden": ForbiddenError,
    "NotFound": NotFoundError,
    "AlreadyExists": AlreadyExistsError,
    "Conflict": ConflictError,
    "Gone": GoneError,
    "Expired": GoneError,
    "Invalid": InvalidError,
    "TooManyRequests": TooManyRequestsError,
}
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    422: InvalidError,
    429: TooManyRequestsError,
}


def error_from_status(status: Any, code: int | None = None) -> ApiError:
    """The typed error for a `Status` object (from an answer's body or a watch ERROR event)."""
    if not isinstance(status, dict):
        status = {}
    raw_code = status.get("code")
    number = code if code is not None else raw_code if isinstance(raw_code, int) else 500
    reason = status.get("reason") if isinstance(status.get("reason"), str) else ""
    message = status.get("message") if isinstance(status.get("message"), str) else ""
    cls = _BY_REASON.get(reason) or _BY_CODE.get(number) or (ServerError if number >= 500 else ApiError)
    return cls(number, reason or "Unknown", message or f"HTTP {number}", status)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK (ERROR events are raised, not yielded)
    object: Obj


def path_of(
    group: str, version: str, plural: str, namespace: str | None = None, name: str | None = None, sub: str = ""
) -> str:
    """`/api/v1/namespaces/ns/pods/name/status` and the like, with each segment escaped."""
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    if namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{plural}"
    if name is not None:
        base += f"/{quote(name, safe='')}"
    if sub:
        base += f"/{sub}"
    return base


class RestClient:
    """HTTP to the apiservers of one config with one identity, one apiserver at a time (see
    Failover above).  Create it inside the event loop that uses it."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        user_agent: str = "raftkube",
        timeout: float = DEFAULT_TIMEOUT_S,
        max_connections: int = 100,
    ) -> None:
        self.config = config
        self.timeout = timeout
        headers = {"User-Agent": user_agent, "Accept": "application/json", **config.headers()}
        ssl_ctx = config.ssl_context() if any(s.startswith("https://") for s in config.endpoints) else None
        connector = TrackedConnector(limit=max_connections, ssl=ssl_ctx if ssl_ctx is not None else False)
        self._connector = connector
        self._server_hostname = config.tls_server_name
        self._impersonation: tuple[tuple[str, str], ...] = ()
        self._servers = config.endpoints
        self._current = 0
        self._last_failure = "no apiserver"
        self._session = aiohttp.ClientSession(
            headers=headers,
            connector=connector,
            json_serialize=lambda o: orjson.dumps(o).decode(),
        )

    def impersonating(self, user: str, groups: tuple[str, ...] = ()) -> RestClient:
        """This client's connections, its requests made as `user` in `groups` (kube's
        Impersonate-User/-Group headers; this client's identity needs the `impersonate` verb).
        Many identities share one pool: hollow nodes are each `system:node:<name>` this way.
        Close only the original."""
        clone = copy.copy(self)
        clone._impersonation = (("Impersonate-User", user), *(("Impersonate-Group", g) for g in groups))
        return clone

    async def close(self) -> None:
        """Close every connection and return once each socket is closed (see TrackedConnector)."""
        await self._session.close()
        await self._connector.wait_closed(CLOSE_TIMEOUT_S)

    async def __aenter__(self) -> RestClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plain requests ---------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        """The decoded JSON answer (None for an empty one); ApiError / TransportError otherwise."""
        data = None if body is None else body if isinstance(body, bytes) else orjson.dumps(body)
        headers: list[tuple[str, str]] | None = [("Content-Type", content_type)] if data is not None else None
        if self._impersonation:
            headers = [*(headers or ()), *self._impersonation]
        kwargs: dict[str, Any] = {}
        if self._server_hostname:
            kwargs["server_hostname"] = self._server_hostname
        deadline = timeout or self.timeout
        client_timeout = aiohttp.ClientTimeout(total=deadline, sock_connect=min(deadline, CONNECT_TIMEOUT_S))
        for server in self._rotation():
            try:
                async with self._session.request(
                    method,
                    server + path,
                    params=_params(params),
                    data=data,
                    headers=headers,
                    timeout=client_timeout,
                    **kwargs,
                ) as resp:
                    raw = await _read_bounded(resp, MAX_BODY_BYTES)
                    status = resp.status
                break
            except _NOT_CONNECTED as e:
                self._failed(server, f"{method} {path}", e)
            except (TimeoutError, aiohttp.ClientError, OSError) as e:
                self._failed(server, "", e)
                raise TransportError(f"{method} {path}: {type(e).__name__}: {e}") from None
        decoded = _decode(raw) if raw else None
        if status >= 300:
            raise error_from_status(decoded, status)
        return decoded

    @property
    def server(self) -> str:
        """The apiserver the next request goes to."""
        return self._servers[self._current]

    def _rotation(self) -> Iterator[str]:
        """Each apiserver once, from the current one; then TransportError with the last reason."""
        start = self._current
        for i in range(len(self._servers)):
            yield self._servers[(start + i) % len(self._servers)]
        tried = f" (tried {', '.join(self._servers)})" if len(self._servers) > 1 else ""
        raise TransportError(self._last_failure + tried)

    def _failed(self, server: str, what: str, e: BaseException) -> None:
        """`server` failed: the next request starts at the apiserver after it (unless a
        concurrent failure moved on already)."""
        self._last_failure = f"{what}: {type(e).__name__}: {e}" if what else f"{type(e).__name__}: {e}"
        if self._servers[self._current] == server:
            self._current = (self._current + 1) % len(self._servers)

    async def get(self, path: str, params: Params | None = None) -> Obj:
        return dict(await self.request("GET", path, params=params))

    async def create(self, path: str, body: Obj, params: Params | None = None) -> Obj:
        return dict(await self.request("POST", path, params=params, body=body))

    async def replace(self, path: str, body: Obj, params: Params | None = None) -> Obj:
        return dict(await self.request("PUT", path, params=params, body=body))

    async def patch(self, path: str, body: Any, patch_type: str = "merge", params: Params | None = None) -> Obj:
        """`patch_type`: merge, strategic, json or apply (server-side apply needs fieldManager)."""
        types = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "json": "application/json-patch+json",
            "apply": "application/apply-patch+yaml",
        }
        return dict(await self.request("PATCH", path, params=params, body=body, content_type=types[patch_type]))

    async def delete(self, path: str, body: Obj | None = None, params: Params | None = None) -> Obj:
        return dict(await self.request("DELETE", path, params=params, body=body) or {})

    # -- watch ------------------------------------------------------------------------------

    async def watch(self, path: str, params: Params | None = None) -> AsyncIterator[WatchEvent]:
        """The events of a watch until the server ends it; an ERROR event raises its ApiError.

        `timeoutSeconds` in `params` bounds the stream on the server; the connection itself
        has no total deadline (a watch lives long), only one on connecting."""
        query = dict(_params(params) or {}) | {"watch": "true"}
        kwargs: dict[str, Any] = {}
        if self._server_hostname:
            kwargs["server_hostname"] = self._server_hostname
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self.timeout, sock_connect=min(self.timeout, CONNECT_TIMEOUT_S)
        )
        headers = list(self._impersonation) or None
        for server in self._rotation():
            try:
                async with self._session.get(
                    server + path, params=query, timeout=timeout, headers=headers, **kwargs
                ) as resp:
                    if resp.status >= 300:
                        raw = await _read_bounded(resp, MAX_EVENT_BYTES)
                        raise error_from_status(_decode(raw) if raw else None, resp.status)
                    async for line in _lines(resp, MAX_EVENT_BYTES):
                        yield _event(line)
                return
            except _NOT_CONNECTED as e:
                self._failed(server, f"watch {path}", e)
            except (TimeoutError, aiohttp.ClientError, OSError) as e:
                self._failed(server, "", e)
                raise TransportError(f"watch {path}: {type(e).__name__}: {e}") from None


_NOT_CONNECTED = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
"""Failures before the request was sent: safe to send it to the next apiserver."""


def _params(params: Params | None) -> dict[str, str] | None:
    if not params:
        return None
    return {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in params.items()}


async def _read_bounded(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise TransportError(f"{resp.method} {resp.url.path}: answer larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _lines(resp: aiohttp.ClientResponse, limit: int) -> AsyncIterator[bytes]:
    """Newline-delimited frames; a frame over `limit` bytes ends the stream with an error."""
    pending = bytearray()
    async for chunk in resp.content.iter_any():
        pending += chunk
        while (end := pending.find(b"\n")) >= 0:
            if end > limit:
                break
            line = bytes(pending[:end])
            del pending[: end + 1]
            if line.strip():
                yield line
        if len(pending) > limit:  # a whole frame over the limit, or the start of one
            raise TransportError(f"watch {resp.url.path}: an event larger than {limit} bytes")
    if pending.strip():
        yield bytes(pending)


def _decode(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise TransportError(f"the apiserver answered with something that is not JSON: {raw[:200]!r}") from None


def _event(line: bytes) -> WatchEvent:
    decoded = _decode(line)
    if not isinstance(decoded, dict) or not isinstance(decoded.get("type"), str):
        raise TransportError(f"a watch event without a type: {line[:200]!r}")
    obj = decoded.get("object")
    if decoded["type"] == "ERROR":
        raise error_from_status(obj)
    if decoded["type"] not in EVENT_TYPES:  # a reflector could only guess what it means
        raise TransportError(f"a watch event of unknown type {decoded['type'][:40]!r}")
    if not isinstance(obj, dict):
        raise TransportError(f"a {decoded['type']} watch event without an object")
    return WatchEvent(decoded["type"], obj)
