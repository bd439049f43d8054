"""Calling the server behind an APIService: the availability check's GET and the relay of a
client's request, over one pooled aiohttp session.

The connection goes to one ready endpoint of the APIService's Service (kube-apiserver with
`--enable-aggregator-routing=true`: raftkube has no service proxy), its certificate verified
against `<service>.<namespace>.svc` with the APIService's caBundle, the aggregator showing its
front-proxy certificate (front_proxy.py).  A relayed request keeps its method, path, query,
body and headers, less the caller's credentials and hop-by-hop headers, plus the
`X-Remote-*` headers naming the user the apiserver authenticated; the answer streams back
with its status and headers (a watch streams as long as both ends stay).  A server that cannot
be reached is kube's 503 `ServiceUnavailable`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
import orjson
from starlette.responses import StreamingResponse

from apiserver import errors
from apiserver.admission.webhook.client import ServiceResolver
from apiserver.aggregator.front_proxy import BadCABundle, FrontProxy, user_headers
from apiserver.auth.user import User
from apiserver.http.kubelet_proxy import chunks_of
from apiserver.service_routing import NoRoute, server_name
from machinery.objects import Obj, as_dict

CONNECT_TIMEOUT_S = 5.0
CHECK_TIMEOUT_S = 5.0
"""kube's availability check gives a server 5 s to answer its discovery."""
MAX_CHECK_BYTES = 4 * 1024 * 1024
"""A discovery document read by the check is at most this long (it is held, unlike a relay)."""

# never passed on: the caller's credentials (the aggregator speaks for the user itself), the
# user headers a caller might forge, and the hop-by-hop headers of this connection
DROPPED = frozenset(
    {"authorization", "host", "connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length"}
)
DROPPED_PREFIXES = ("impersonate-", "x-remote-", "proxy-")
AUTO_HEADERS = ("Content-Type", "Accept-Encoding")
# answer headers that describe this hop, not the body
HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "server", "date"})


@dataclass(frozen=True)
class Target:
    """Where an APIService's server is: the address dialled and the name its certificate must carry."""

    address: str
    server_name: str


class Unreachable(Exception):
    """Why the server behind an APIService cannot be called (the availability condition's words)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def service_of(apiservice: Obj) -> Obj | None:
    """The APIService's `spec.service` (None: a local APIService)."""
    service = as_dict(apiservice.get("spec")).get("service")
    return service if isinstance(service, dict) else None


class AggregatorClient:
    """One pooled session to every aggregated server."""

    def __init__(self, front_proxy: FrontProxy, resolve_service: ServiceResolver) -> None:
        self.front_proxy = front_proxy
        self._resolve = resolve_service
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
                auto_decompress=False,
            )
            self._loop = loop
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def target(self, apiservice: Obj) -> Target:
        """One endpoint of the APIService's Service; Unreachable (kube's reasons) when there is none."""
        service = service_of(apiservice)
        assert service is not None
        namespace, name = str(service.get("namespace") or ""), str(service.get("name") or "")
        port = service["port"] if isinstance(service.get("port"), int) else 443
        try:
            address = await self._resolve(namespace, name, port)
        except NoRoute as e:
            text = str(e)
            if text.endswith("not found"):
                raise Unreachable("ServiceNotFound", f'service/{name} in "{namespace}" is not present') from None
            if text.startswith("no endpoints"):
                raise Unreachable(
                    "MissingEndpoints", f'endpoints for service/{name} in "{namespace}" have no addresses'
                ) from None
            raise Unreachable("ServiceAccessError", text) from None
        return Target(address, server_name(namespace, name))

    def _tls(self, apiservice: Obj) -> ssl.SSLContext:
        spec = as_dict(apiservice.get("spec"))
        try:
            return self.front_proxy.client_context(spec.get("caBundle"), spec.get("insecureSkipTLSVerify") is True)
        except BadCABundle as e:
            raise Unreachable("FailedDiscoveryCheck", str(e)) from None

    async def discover(self, apiservice: Obj) -> Obj | None:
        """The availability check: GET /apis/<group>/<version> as system:kube-aggregator (in
        system:masters, so authorization cannot fail it); its APIResourceList when the server
        answers 200, None when it answers 403 (up, but not telling us); Unreachable otherwise."""
        spec = as_dict(apiservice.get("spec"))
        return await self.get_json(apiservice, f"/apis/{spec.get('group')}/{spec.get('version')}")

    async def openapi_url(self, apiservice: Obj) -> str | None:
        """Where the server's OpenAPI v3 document of the APIService's group-version is (its
        root's `serverRelativeURL`, with the hash), None when it serves none."""
        spec = as_dict(apiservice.get("spec"))
        try:
            root = await self.get_json(apiservice, "/openapi/v3")
        except Unreachable:
            return None
        entry = as_dict(as_dict(as_dict(root).get("paths")).get(f"apis/{spec.get('group')}/{spec.get('version')}"))
        url = entry.get("serverRelativeURL")
        return url if isinstance(url, str) and url.startswith("/openapi/v3/") else None

    async def get_json(self, apiservice: Obj, path: str) -> Obj | None:
        """GET `path` of the APIService's server as system:kube-aggregator: the JSON object it
        answers 200 with, None for 403; Unreachable otherwise (each bounded by CHECK_TIMEOUT_S)."""
        target = await self.target(apiservice)
        context = self._tls(apiservice)
        url = f"https://{target.address}{path}"
        shown = f"https://{target.server_name}{path}"
        headers = [*user_headers(User("system:kube-aggregator", ("system:masters",))), ("Accept", "application/json")]
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                async with self._client().get(
                    url, headers=headers, ssl=context, server_hostname=target.server_name, allow_redirects=False
                ) as response:
                    body = await response.content.read(MAX_CHECK_BYTES + 1)
                    status = response.status
        except TimeoutError:
            raise Unreachable(
                "FailedDiscoveryCheck", f"failing or missing response from {shown}: context deadline exceeded"
            ) from None
        except (aiohttp.ClientError, OSError) as e:
            raise Unreachable("FailedDiscoveryCheck", f"failing or missing response from {shown}: {e}") from None
        if status == 403:
            return None
        if status != 200:
            raise Unreachable(
                "FailedDiscoveryCheck", f"failing or missing response from {shown}: bad status from {shown}: {status}"
            )
        if len(body) > MAX_CHECK_BYTES:
            raise Unreachable(
                "FailedDiscoveryCheck", f"the discovery document of {shown} is over {MAX_CHECK_BYTES} bytes"
            )
        try:
            found = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise Unreachable("FailedDiscoveryCheck", f"the discovery document of {shown} is not JSON: {e}") from None
        return found if isinstance(found, dict) else None

    async def relay(
        self, apiservice: Obj, method: str, path_and_query: str, headers: Mapping[str, str], body: bytes, user: User
    ) -> StreamingResponse:
        """The request, sent on for `user`; the server's answer, streamed."""
        try:
            target = await self.target(apiservice)
            context = self._tls(apiservice)
        except Unreachable as e:
            raise errors.unavailable(f"service unavailable: {e}") from None
        passed = [
            (k, v)
            for k, v in headers.items()
            if k.lower() not in DROPPED and not k.lower().startswith(DROPPED_PREFIXES)
        ]
        passed += user_headers(user)
        url = f"https://{target.address}{path_and_query}"
        try:
            response = await self._client().request(
                method,
                url,
                headers=passed,
                data=body or None,
                ssl=context,
                server_hostname=target.server_name,
                allow_redirects=False,
                # only what the client sent: a body without a Content-Type is JSON to a kube
                # server, but aiohttp would call it application/octet-stream
                skip_auto_headers=AUTO_HEADERS,
            )
        except ValueError as e:  # a URL the client library will not send
            raise errors.bad_request(f"cannot proxy to {path_and_query.split('?', maxsplit=1)[0]!r}: {e}") from None
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise errors.unavailable(f"error trying to reach service: {e}") from None
        kept = {k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP}
        return StreamingResponse(chunks_of(response), status_code=response.status, headers=kept)
