"""The HTTPS call to a webhook: one aiohttp session, pooled connections, a deadline per call.

The session is made on first use (inside the serving loop) and kept: connections stay open
between calls, so a webhook costs one TLS handshake per connection, not per request.  Each
call is bounded as a whole by the hook's timeoutSeconds (connect, send, answer), and the URL
carries `?timeout=<n>s` as kube's client adds it.  The answer is read up to a cap.  Every
failure is a CallFailure worded as Go's client words it (`Post "<url>": ...`).

A `clientConfig.service` is called as kube calls it: the URL shown is
`https://<name>.<namespace>.svc:<port><path>`, the connection goes to one ready endpoint of the
service (the resolver's choice, made per call), and the certificate is verified against the
name `<name>.<namespace>.svc`.  A service without a usable endpoint is a call failure like a
refused connection, so failurePolicy decides.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import aiohttp
import orjson

from apiserver.admission.webhook.config import Hook
from apiserver.admission.webhook.failures import CallFailure, http_status_message
from apiserver.service_routing import NoRoute, host_port, server_name

log = logging.getLogger("raftkube.admission.webhook")

MAX_RESPONSE_BYTES = 3 * 1024 * 1024
# (namespace, name, port) -> `host:port` of one endpoint of that service, or NoRoute
ServiceResolver = Callable[[str, str, int], Awaitable[str]]


class WebhookClient:
    def __init__(
        self, *, max_response_bytes: int = MAX_RESPONSE_BYTES, resolve_service: ServiceResolver | None = None
    ) -> None:
        self._max = max_response_bytes
        self._resolve_service = resolve_service
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _current_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60)
            session = aiohttp.ClientSession(
                connector=connector,
                json_serialize=lambda v: orjson.dumps(v).decode(),
                headers={"User-Agent": "raftkube-apiserver-admission", "Accept": "application/json"},
            )
            self._session, self._loop = session, loop
        return session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def _target(self, hook: Hook) -> tuple[str, str, str | None]:
        """(the URL to POST to, the URL to show in errors, the TLS server name to verify)."""
        endpoint = hook.endpoint
        if endpoint.problem is not None:
            raise CallFailure(hook.name, f"could not get REST client: {endpoint.problem}")
        query = f"?timeout={hook.timeout}s"
        if endpoint.url is not None:
            return endpoint.url + query, endpoint.url + query, None
        svc = endpoint.service
        assert svc is not None
        name = server_name(svc.namespace, svc.name)
        path = svc.path if svc.path.startswith("/") else f"/{svc.path}"
        shown = f"https://{host_port(name, svc.port)}{path}{query}"
        if self._resolve_service is None:
            raise CallFailure(hook.name, f'failed to call webhook: Post "{shown}": no service resolver')
        try:
            async with asyncio.timeout(hook.timeout):  # a storage read when the cache lacks the Service
                address = await self._resolve_service(svc.namespace, svc.name, svc.port)
        except NoRoute as e:
            raise CallFailure(hook.name, f'failed to call webhook: Post "{shown}": {e}') from e
        except TimeoutError as e:
            raise CallFailure(hook.name, f'failed to call webhook: Post "{shown}": context deadline exceeded') from e
        return f"https://{address}{path}{query}", shown, name

    async def post(self, hook: Hook, body: bytes) -> bytes:
        """POST `body` to the hook; the answer's body (2xx), or CallFailure."""
        url, shown_url, tls_name = await self._target(hook)
        shown = f'Post "{shown_url}"'
        assert hook.endpoint.ssl is not None
        context: ssl.SSLContext = hook.endpoint.ssl
        try:
            async with asyncio.timeout(hook.timeout):
                async with self._current_session().post(
                    url,
                    data=body,
                    headers={"Content-Type": "application/json"},
                    ssl=context,
                    server_hostname=tls_name,
                    allow_redirects=False,
                ) as response:
                    data = await self._read(hook, response, shown)
                    status = response.status
        except TimeoutError as e:
            raise CallFailure(hook.name, f"failed to call webhook: {shown}: context deadline exceeded") from e
        except aiohttp.ClientConnectorCertificateError as e:
            why = getattr(e.certificate_error, "verify_message", None) or str(e.certificate_error)
            why = _X509.get(why, f"x509: {why}")
            raise CallFailure(
                hook.name, f"failed to call webhook: {shown}: tls: failed to verify certificate: {why}"
            ) from e
        except aiohttp.ClientSSLError as e:
            raise CallFailure(hook.name, f"failed to call webhook: {shown}: tls: {e.strerror or e}") from e
        except aiohttp.ClientConnectorError as e:
            parts = urlsplit(url)
            errno = e.os_error.errno
            why = f"connect: {os.strerror(errno).lower()}" if errno else str(e.os_error)
            raise CallFailure(
                hook.name, f"failed to call webhook: {shown}: dial tcp {parts.hostname}:{parts.port or 443}: {why}"
            ) from e
        except (aiohttp.ClientError, OSError) as e:
            raise CallFailure(hook.name, f"failed to call webhook: {shown}: {e or type(e).__name__}") from e
        if not 200 <= status < 300:
            raise CallFailure(hook.name, f"failed to call webhook: {_status_text(status, data)}")
        return data

    async def _read(self, hook: Hook, response: aiohttp.ClientResponse, shown: str) -> bytes:
        length = response.content_length
        if length is not None and length > self._max:
            raise CallFailure(hook.name, f"failed to call webhook: {shown}: the answer is over {self._max} bytes")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = await response.content.read(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self._max:
                raise CallFailure(hook.name, f"failed to call webhook: {shown}: the answer is over {self._max} bytes")
            chunks.append(chunk)


# OpenSSL's words -> Go's, for the cases a misconfigured caBundle gives
_X509 = {
    "unable to get local issuer certificate": "x509: certificate signed by unknown authority",
    "self-signed certificate": "x509: certificate signed by unknown authority",
    "self-signed certificate in certificate chain": "x509: certificate signed by unknown authority",
    "certificate has expired": "x509: certificate has expired or is not yet valid",
}


def _status_text(code: int, body: bytes) -> str:
    """A Status object's message when the webhook sent one, else client-go's words for the code."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, dict) and value.get("kind") == "Status" and isinstance(value.get("message"), str):
        return str(value["message"])
    return http_status_message(code, body)
