"""The apiserver's way to a kubelet: `pods/log`, `pods/exec`, `pods/portforward` and `nodes/proxy`.

The kubelet is found through its Node (the InternalIP in `status.addresses`, the port in
`status.daemonEndpoints.kubeletEndpoint`) and reached over HTTPS as
`kube-apiserver-kubelet-client` (a client certificate the kubelet trusts), its serving
certificate checked against the kubelet CA.  Logs and node proxy requests are streamed through
(a log read over a WebSocket is `wsstream.ByteStream`'s); exec and port-forward are WebSocket
sessions relayed message by message, the subprotocol the kubelet chose passed back to the
client, so the apiserver needs no part of their protocols.
A kubelet's error (its status and text) reaches the client as a `Status` with that code.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
from starlette.responses import Response, StreamingResponse
from starlette.websockets import WebSocket

from apiserver import errors
from apiserver.http.params import query_bool
from machinery import pod_log_options
from machinery.objects import Obj
from machinery.tasks import until_first_ends

log = logging.getLogger("raftkube.apiserver.kubelet")
CONNECT_TIMEOUT_S = 5.0
KUBELET_ERROR_HEADER = "Kubelet-Error"
MAX_MESSAGE = 1 << 20
_REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 503: "ServiceUnavailable"}


@dataclass(frozen=True, slots=True)
class KubeletTarget:
    host: str
    port: int

    def url(self, path: str, query: str = "") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}{path}" + (f"?{query}" if query else "")


def kubelet_of(node: Mapping[str, Any]) -> KubeletTarget:
    """Where a Node's kubelet listens; 400 as kube says it when the Node does not tell."""
    status = node.get("status") or {}
    name = (node.get("metadata") or {}).get("name")
    addresses = [a for a in status.get("addresses") or () if isinstance(a, dict)]
    for kind in ("InternalIP", "ExternalIP", "Hostname"):
        found = next((a.get("address") for a in addresses if a.get("type") == kind and a.get("address")), None)
        if isinstance(found, str):
            break
    else:
        raise errors.bad_request(f'node "{name}": no preferred addresses found; known addresses: {addresses}')
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise errors.bad_request(f'node "{name}": its kubelet port is not known (status.daemonEndpoints)')
    return KubeletTarget(found, port)


def container_of(pod: Mapping[str, Any], wanted: str) -> str:
    """The container a log or exec request means: the one named (an ephemeral one too), or the
    pod's only one."""
    spec = pod.get("spec") or {}
    name = (pod.get("metadata") or {}).get("name")
    names = [c.get("name") for c in spec.get("containers") or () if isinstance(c, dict)]
    init = [c.get("name") for c in spec.get("initContainers") or () if isinstance(c, dict)]
    if not wanted:
        if len(names) == 1:
            return str(names[0])
        message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(map(str, names))}]"
        if init:
            message += f" or one of the init containers: [{' '.join(map(str, init))}]"
        raise errors.bad_request(message)
    ephemeral = [c.get("name") for c in spec.get("ephemeralContainers") or () if isinstance(c, dict)]
    if wanted not in names and wanted not in init and wanted not in ephemeral:
        raise errors.bad_request(f"container {wanted} is not valid for pod {name}")
    return wanted


def node_of(pod: Mapping[str, Any]) -> str:
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:
        raise errors.bad_request(f"pod {(pod.get('metadata') or {}).get('name')} does not have a host assigned")
    return str(node)


def _error(status: int, text: str) -> errors.StatusError:
    code = status if 400 <= status < 600 else 502
    return errors.StatusError(
        code, _REASONS.get(code, "InternalError"), text.strip() or f"the kubelet answered {status}"
    )


async def chunks_of(response: aiohttp.ClientResponse) -> AsyncGenerator[bytes, None]:
    """A relayed answer's body as it comes; the connection goes back to the pool at its end, or
    when the client that reads it leaves."""
    try:
        async for chunk in response.content.iter_any():
            yield chunk
    except (aiohttp.ClientError, OSError):
        return
    finally:
        response.release()


class KubeletClient:
    """One pooled HTTPS session to every kubelet."""

    def __init__(self, tls: ssl.SSLContext | None) -> None:
        self.tls = tls
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self.tls is None:
            raise errors.unavailable("this apiserver has no kubelet client credentials (--kubelet-client-certificate)")
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.tls, limit=256),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def stream(self, url: str) -> tuple[str, AsyncGenerator[bytes, None]]:
        """GET `url`: (its content type, its body in chunks as they come); a kubelet error
        raises its StatusError."""
        try:
            response = await self._client().get(url)
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise errors.unavailable(f"cannot reach the kubelet at {url.split('?', maxsplit=1)[0]}: {e}") from None
        if response.status >= 300:
            text = (await response.content.read(4096)).decode(errors="replace")
            response.release()
            raise _error(response.status, text)
        return response.headers.get("Content-Type", "text/plain"), chunks_of(response)

    async def websocket(self, url: str, protocols: list[str]) -> aiohttp.ClientWebSocketResponse:
        """A WebSocket to the kubelet offering the client's subprotocols; a refusal raises the
        kubelet's StatusError."""
        try:
            return await self._client().ws_connect(
                url, protocols=protocols, max_msg_size=MAX_MESSAGE, autoping=True, autoclose=True
            )
        except aiohttp.WSServerHandshakeError as e:
            why = (e.headers.get(KUBELET_ERROR_HEADER) if e.headers else None) or e.message  # our kubelet says why
            raise _error(e.status, why) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise errors.unavailable(f"cannot reach the kubelet at {url.split('?', maxsplit=1)[0]}: {e}") from None


def log_url(kubelet: KubeletTarget, pod: Mapping[str, Any], query: Mapping[str, str]) -> str:
    """The kubelet URL of `pods/log` with these query parameters (checked: 400 names the bad one)."""
    try:
        options = pod_log_options.parse(query)
    except ValueError as e:
        raise errors.bad_request(str(e)) from None
    container = container_of(pod, options.container)
    return kubelet.url(_pod_path("containerLogs", pod, container), options.query())


@dataclass(frozen=True)
class StreamEndpoint:
    """Which kubelet call a stream subresource (exec, port-forward) is: the kubelet's path and
    what of the request goes on to it.  The subresource's handler object carries it, so this
    module knows no subresource by name."""

    # the kubelet's endpoint: /<path>/<namespace>/<pod>[/<container>]
    path: str
    # the query parameters passed on to the kubelet
    passed: tuple[str, ...]
    # whether the path ends in a container (the request's `container`, or the pod's only one)
    names_container: bool = False
    # the kind of the request's options, which admission sees as the connect's object
    options_kind: str = ""

    def options(self, pod: Mapping[str, Any], query: list[tuple[str, str]]) -> Obj:
        """The request as the options object kube's admission sees for a CONNECT (v1
        PodExecOptions, PodAttachOptions, PodPortForwardOptions); 400 names a bad parameter."""
        single = dict(query)
        out: Obj = {"kind": self.options_kind, "apiVersion": "v1"}
        for name in ("stdin", "stdout", "stderr", "tty"):
            if name in self.passed:
                out[name] = query_bool(single, name)
        if self.names_container:
            out["container"] = self.container(pod, query)[0]
        if "command" in self.passed:
            out["command"] = [v for k, v in query if k == "command"]
        if "ports" in self.passed:
            ports = []
            for k, v in query:
                if k == "ports":
                    for part in v.split(","):
                        if not (part.isascii() and part.isdigit() and 0 < int(part) < 65536):
                            raise errors.bad_request(f"ports: invalid value {part!r}: must be a port number")
                        ports.append(int(part))
            out["ports"] = ports
        return out

    def container(self, pod: Mapping[str, Any], query: list[tuple[str, str]]) -> tuple[str, ...]:
        """The container part of the path (checked: 400 when the pod has no such container)."""
        if not self.names_container:
            return ()
        return (container_of(pod, next((v for k, v in query if k == "container"), "")),)

    def url(self, kubelet: KubeletTarget, pod: Mapping[str, Any], query: list[tuple[str, str]]) -> str:
        passed = [(k, v) for k, v in query if k in self.passed]
        return kubelet.url(_pod_path(self.path, pod, *self.container(pod, query)), urlencode(passed))


EXEC = StreamEndpoint(
    "exec", ("command", "stdin", "stdout", "stderr", "tty"), names_container=True, options_kind="PodExecOptions"
)
ATTACH = StreamEndpoint(
    "attach", ("stdin", "stdout", "stderr", "tty"), names_container=True, options_kind="PodAttachOptions"
)
PORT_FORWARD = StreamEndpoint("portForward", ("ports",), options_kind="PodPortForwardOptions")


def _pod_path(endpoint: str, pod: Mapping[str, Any], *more: str) -> str:
    """/<endpoint>/<namespace>/<pod>[/<container>] on the kubelet, each part escaped."""
    meta = pod.get("metadata") or {}
    parts = (meta.get("namespace"), meta.get("name"), *more)
    return f"/{endpoint}/" + "/".join(quote(str(p), safe="") for p in parts)


@dataclass(frozen=True, eq=False)
class Relayed:
    """An exec or port-forward session (a `wsstream.WebSocketSession`): the kubelet's WebSocket,
    accepted with the subprotocol the kubelet chose and relayed."""

    kubelet: aiohttp.ClientWebSocketResponse

    @property
    def protocol(self) -> str | None:
        return self.kubelet.protocol

    async def serve(self, websocket: WebSocket) -> None:
        await relay(websocket, self.kubelet)


async def relay(client: WebSocket, kubelet: aiohttp.ClientWebSocketResponse) -> None:
    """Messages both ways until either side closes; then the other is closed too.  `client`
    is the Starlette WebSocket, already accepted."""

    async def up() -> None:
        while True:
            message = await client.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes") is not None:
                await kubelet.send_bytes(message["bytes"])
            elif message.get("text") is not None:
                await kubelet.send_str(message["text"])

    async def down() -> None:
        async for msg in kubelet:
            if msg.type == aiohttp.WSMsgType.BINARY:
                await client.send_bytes(msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                await client.send_text(msg.data)
            else:
                return

    try:
        await until_first_ends(up(), down())
    finally:
        with contextlib.suppress(Exception):
            await kubelet.close()
        with contextlib.suppress(Exception):
            await client.close()


Getter = Callable[[str | None, str], Awaitable[Obj]]  # (namespace, name) -> the object, or 404
FAILED_UPGRADE_TTL_S = 10.0
FAILED_UPGRADES_KEPT = 1024


class FailedUpgrades:
    """Why recent WebSocket upgrades failed, for the SPDY retry that follows each one.

    kubectl retries a refused exec or port-forward WebSocket with an SPDY POST to the same URL
    and shows the user only the retry's error.  We do not speak SPDY, so the retry gets the
    refusal the WebSocket got (the kubelet's "container is not running", a 403) instead of a
    word about protocols.  Bounded in count and time."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._errors: OrderedDict[tuple[str, str, str], tuple[float, errors.StatusError]] = OrderedDict()

    def remember(self, user: str, path: str, query: str, error: errors.StatusError) -> None:
        self._errors[(user, path, query)] = (self.clock() + FAILED_UPGRADE_TTL_S, error)
        self._errors.move_to_end((user, path, query))
        while len(self._errors) > FAILED_UPGRADES_KEPT:
            self._errors.popitem(last=False)

    def recall(self, user: str, path: str, query: str) -> errors.StatusError | None:
        found = self._errors.pop((user, path, query), None)
        return found[1] if found is not None and found[0] > self.clock() else None


class NodeAccess:
    """The requests that end on a kubelet, given how to read pods and nodes."""

    def __init__(
        self, client: KubeletClient, get_pod: Getter, get_node: Getter, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self.get_pod = get_pod
        self.get_node = get_node
        self.failed_upgrades = FailedUpgrades(clock)

    async def _pod_and_kubelet(self, namespace: str | None, name: str) -> tuple[Obj, KubeletTarget]:
        pod = await self.get_pod(namespace, name)
        node = await self.get_node(None, node_of(pod))
        return pod, kubelet_of(node)

    async def pod_log(self, namespace: str | None, name: str, query: Mapping[str, str]) -> Response:
        opened = await self.pod_log_stream(namespace, name, query)
        if opened is None:
            return Response(status_code=204)  # kube's answer: no node, nothing logged yet
        content_type, body = opened
        return StreamingResponse(body, media_type=content_type if content_type.startswith("text/") else "text/plain")

    async def pod_log_stream(
        self, namespace: str | None, name: str, query: Mapping[str, str]
    ) -> tuple[str, AsyncGenerator[bytes, None]] | None:
        """The container's log from its kubelet: (its content type, its bytes as they come);
        None when the pod has no node yet (its options and container are checked all the same)."""
        pod = await self.get_pod(namespace, name)
        if not (pod.get("spec") or {}).get("nodeName"):
            log_url(KubeletTarget("", 1), pod, query)
            return None
        kubelet = kubelet_of(await self.get_node(None, node_of(pod)))
        return await self.client.stream(log_url(kubelet, pod, query))

    async def node_proxy(self, name: str, path: str, query: str) -> StreamingResponse:
        kubelet = kubelet_of(await self.get_node(None, name))
        content_type, body = await self.client.stream(kubelet.url("/" + path.lstrip("/"), query))
        return StreamingResponse(body, media_type=content_type)

    async def check_stream(
        self, namespace: str | None, name: str, endpoint: StreamEndpoint, query: list[tuple[str, str]]
    ) -> Obj:
        """The checks of an exec, attach or port-forward request, without opening it: its
        options object (what admission sees)."""
        pod, _ = await self._pod_and_kubelet(namespace, name)
        return endpoint.options(pod, query)

    async def pod_stream(
        self,
        namespace: str | None,
        name: str,
        endpoint: StreamEndpoint,
        query: list[tuple[str, str]],
        protocols: list[str],
    ) -> Relayed:
        """An exec or port-forward session, its kubelet side opened."""
        pod, kubelet = await self._pod_and_kubelet(namespace, name)
        return Relayed(await self.client.websocket(endpoint.url(kubelet, pod, query), protocols))
