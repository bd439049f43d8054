"""`pods/proxy`: an HTTP request relayed to a pod, as kube-apiserver's proxy does it.

The path names the pod as `[scheme:]name[:port]` (`/api/v1/namespaces/ns/pods/web:8080/proxy/
healthz`); without a port the pod's first declared container port is used, as kube's
ResourceLocation does.  The request goes to the pod's IP (its status), with its method, the
rest of the path, the query and the body; the answer comes back with its status, its content
type and its body streamed.  https is not verified (kube's pod proxy does not either).  What a
client sends is bounded by the apiserver's body limit; what the pod answers is streamed, never
held.  A pod that is not running, has no IP or does not answer is kube's 503.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from apiserver import errors
from apiserver.http.kubelet_proxy import chunks_of
from apiserver.http.proxy_rewrite import MAX_REWRITE_BYTES, rewrite_body, rewrite_url
from apiserver.http.requestinfo import ResourcePath

CONNECT_TIMEOUT_S = 5.0
PASSED_HEADERS = ("accept", "content-type", "user-agent")  # kube drops the rest (credentials above all)


@dataclass(frozen=True, slots=True)
class ProxyTarget:
    scheme: str
    name: str
    port: str


def parse_target(text: str) -> ProxyTarget:
    """`name`, `name:port` or `scheme:name:port` (kube's net.SplitSchemeNamePort); 400 otherwise."""
    parts = text.split(":")
    if len(parts) == 1:
        target = ProxyTarget("", parts[0], "")
    elif len(parts) == 2:
        target = ProxyTarget("", parts[0], parts[1])
    elif len(parts) == 3 and parts[0] in ("http", "https", ""):
        target = ProxyTarget(parts[0], parts[1], parts[2])
    else:
        raise errors.bad_request(f"invalid proxy target {text!r}: want name, name:port or scheme:name:port")
    if not target.name:
        raise errors.bad_request(f"invalid proxy target {text!r}: no pod name")
    return target


def pod_port(pod: Mapping[str, Any], port: str) -> int:
    """The port to reach: a number, a container port's name, or (none) the first declared one."""
    declared = [
        p
        for c in (pod.get("spec") or {}).get("containers") or ()
        if isinstance(c, dict)
        for p in c.get("ports") or ()
        if isinstance(p, dict) and isinstance(p.get("containerPort"), int)
    ]
    if not port:
        if not declared:
            return 80  # kube's default when the pod declares no port
        return int(declared[0]["containerPort"])
    if port.isascii() and port.isdigit():
        number = int(port)
        if 0 < number < 65536:
            return number
        raise errors.bad_request(f"invalid port {port!r}")
    named = next((p for p in declared if p.get("name") == port), None)
    if named is None:
        raise errors.bad_request(f"no port named {port!r} in pod {(pod.get('metadata') or {}).get('name')}")
    return int(named["containerPort"])


def pod_url(pod: Mapping[str, Any], target: ProxyTarget, subpath: str, query: str) -> str:
    """Where the request goes: the pod's IP and port, the rest of the path and the query."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    ip = status.get("podIP")
    if not ip or status.get("phase") in ("Succeeded", "Failed"):
        raise errors.unavailable(f"pod {meta.get('name')} has no running address to proxy to")
    host = f"[{ip}]" if ":" in str(ip) else str(ip)
    path = "/" + quote(subpath.lstrip("/"), safe="/:@!$&'()*+,;=-._~%")
    return f"{target.scheme or 'http'}://{host}:{pod_port(pod, target.port)}{path}" + (f"?{query}" if query else "")


def proxy_prefix(target: ResourcePath, plural: str) -> str:
    """The path a client proxies through (`/api/v1/namespaces/NS/pods/NAME/proxy`): links in the
    answer are rewritten under it."""
    return f"/api/v1/namespaces/{target.namespace}/{plural}/{target.name}/proxy"


def redirect_bare(request: Request) -> Response | None:
    """kube's answer to a GET or HEAD of `.../proxy` without a path: 301 to `.../proxy/` (the
    target's root), the query kept; None for anything else."""
    if request.method not in ("GET", "HEAD") or not request.url.path.endswith("/proxy"):
        return None
    query = request.url.query
    return Response(status_code=301, headers={"Location": request.url.path + "/" + (f"?{query}" if query else "")})


class PodProxyClient:
    """One pooled session to pods (plain HTTP, or https without verification)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            unverified = ssl.create_default_context()
            unverified.check_hostname = False
            unverified.verify_mode = ssl.CERT_NONE
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=unverified, limit=256),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
                auto_decompress=False,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def relay(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, rewrite_prefix: str | None = None
    ) -> Response:
        """Send the request on; the pod's answer, streamed.  With `rewrite_prefix` (the proxy
        path the client used), an HTML answer's links and a redirect's Location go through the
        proxy again (proxy_rewrite.py), as kube's proxy transport rewrites them."""
        passed = {k: v for k, v in headers.items() if k.lower() in PASSED_HEADERS}
        try:
            response = await self._client().request(method, url, headers=passed, data=body or None)
        except ValueError as e:  # a URL the client library will not send (a path yarl refuses)
            raise errors.bad_request(f"cannot proxy to {url.split('?', maxsplit=1)[0]!r}: {e}") from None
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise errors.unavailable(f"error trying to reach the pod at {url.split('?', maxsplit=1)[0]}: {e}") from None

        kept = {k: v for k, v in response.headers.items() if k.lower() in ("content-type", "content-encoding")}
        if rewrite_prefix is None:
            return StreamingResponse(chunks_of(response), status_code=response.status, headers=kept)
        location = response.headers.get("Location")
        if location and 300 <= response.status < 400:
            kept["Location"] = rewrite_url(location, rewrite_prefix)
        html = response.headers.get("Content-Type", "").split(";")[0].strip().lower() == "text/html"
        if not html or (response.content_length or 0) > MAX_REWRITE_BYTES:
            return StreamingResponse(chunks_of(response), status_code=response.status, headers=kept)
        page = await response.content.read(MAX_REWRITE_BYTES + 1)
        if len(page) > MAX_REWRITE_BYTES:
            return StreamingResponse(_then(page, chunks_of(response)), status_code=response.status, headers=kept)
        response.release()
        rewritten = rewrite_body(page, response.headers.get("Content-Encoding", ""), rewrite_prefix)
        return Response(page if rewritten is None else rewritten, status_code=response.status, headers=kept)


async def _then(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk
