"""A TCP balancer in front of several apiservers: what haproxy or a cloud load balancer is in
front of an HA kube-apiserver set, so that kubectl (which dials one `server`) survives the
loss of any apiserver.

It passes TLS through untouched (clients verify the apiservers' own certificate and present
their own client certificates to them; the balancer holds no credentials and sees no
plaintext).  Each new connection goes to the healthy apiserver with the fewest open
connections (haproxy's `leastconn`, the choice for long-lived connections such as watches),
ties taken in turn.  Health is /readyz asked over TLS every `probe_interval` (with the
balancer's own client certificate: kube's public-info-viewer lets any user read it), as load
balancers in front of kube-apiservers are told to check; an apiserver whose connect fails is
taken out at once, until a probe says it is back.  Connections already open stay where they
are when their apiserver turns unready (it may still serve them); a dead one's break, and
their clients reconnect.

Bounded: at most `max_connections` client connections (more are closed as they arrive), a
64 KiB buffer each way per connection with back-pressure (a slow reader stops its writer).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

log = logging.getLogger("raftkube.balancer")

CHUNK = 64 * 1024
DEFAULT_MAX_CONNECTIONS = 10_000
DEFAULT_CONNECT_TIMEOUT_S = 3.0
DEFAULT_PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 2.0
MAX_PROBE_ANSWER = 4096
NOT_PROBED = "not probed yet"


@dataclass(eq=False)
class Backend:
    """One apiserver behind the balancer."""

    host: str
    port: int
    healthy: bool = False
    connections: int = 0
    why: str = NOT_PROBED

    @property
    def name(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


Probe = Callable[[Backend], Awaitable[str | None]]
"""None: ready; else why not."""


def readyz_probe(tls: ssl.SSLContext | None, server_name: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> Probe:
    """GET /readyz over TLS (`tls`: the CA to verify with and the certificate to show,
    `server_name` the name to expect, default the backend's host; None: a TCP connect only)."""

    async def probe(backend: Backend) -> str | None:
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    backend.host, backend.port, ssl=tls, server_hostname=(server_name or backend.host) if tls else None
                )
                if tls is None:
                    return None
                writer.write(
                    f"GET /readyz HTTP/1.1\r\nHost: {backend.name}\r\nConnection: close\r\n\r\n".encode("ascii")
                )
                await writer.drain()
                status_line = await reader.readline()
        except (OSError, TimeoutError, ssl.SSLError) as e:
            return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        finally:
            if writer is not None:
                writer.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer.wait_closed(), 1.0)
        fields = status_line[:MAX_PROBE_ANSWER].split()  # HTTP/1.1 200 OK
        if len(fields) >= 2 and fields[1] == b"200":
            return None
        said = b" ".join(fields[1:3]).decode("ascii", "replace")[:80]
        return f"/readyz answered {said or 'nothing'}"

    return probe


@dataclass
class _Metrics:
    registry: CollectorRegistry
    up: Gauge = field(init=False)
    open: Gauge = field(init=False)
    accepted: Counter = field(init=False)
    refused: Counter = field(init=False)

    def __post_init__(self) -> None:
        r = self.registry
        self.up = Gauge("balancer_backend_up", "1 while the apiserver's /readyz says ready", ["backend"], registry=r)
        self.open = Gauge("balancer_backend_connections", "connections open to the apiserver", ["backend"], registry=r)
        self.accepted = Counter(
            "balancer_connections", "client connections passed to the apiserver", ["backend"], registry=r
        )
        self.refused = Counter(
            "balancer_refused_connections", "client connections closed unserved", ["reason"], registry=r
        )


class Balancer:
    def __init__(
        self,
        backends: list[Backend],
        probe: Probe,
        registry: CollectorRegistry,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        probe_interval: float = DEFAULT_PROBE_INTERVAL_S,
    ) -> None:
        if not backends:
            raise ValueError("a balancer needs at least one backend")
        self.backends = backends
        self.probe = probe
        self.max_connections = max_connections
        self.connect_timeout = connect_timeout
        self.probe_interval = probe_interval
        self.metrics = _Metrics(registry)
        self.open_connections = 0
        self._turn = itertools.count()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle
    async def start(self, host: str, port: int) -> None:
        await self.probe_all()  # the first connections already know who is up
        self._server = await asyncio.start_server(self._accepted, host, port, limit=CHUNK)

    @property
    def listening(self) -> bool:
        return self._server is not None and self._server.is_serving()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)

    async def probe_forever(self) -> None:
        while True:
            await asyncio.sleep(self.probe_interval)
            await self.probe_all()

    async def probe_all(self) -> None:
        results = await asyncio.gather(*(self.probe(b) for b in self.backends))
        for backend, why in zip(self.backends, results, strict=True):
            self._set_health(backend, why)

    def _set_health(self, backend: Backend, why: str | None) -> None:
        if (why is None) != backend.healthy or backend.why == NOT_PROBED:
            log.info("%s is %s", backend.name, "ready" if why is None else f"out of rotation ({why})")
        backend.healthy, backend.why = why is None, why or "ready"
        self.metrics.up.labels(backend.name).set(1 if backend.healthy else 0)

    def healthy(self) -> str | None:
        """None while listening with at least one ready apiserver; else why not (for /healthz)."""
        if not self.listening:
            return "not listening"
        if not any(b.healthy for b in self.backends):
            return "no apiserver is ready: " + "; ".join(f"{b.name} {b.why}" for b in self.backends)
        return None

    # ------------------------------------------------------------------ connections
    def candidates(self) -> list[Backend]:
        """The ready apiservers, fewest connections first; ties in turn."""
        ready = [b for b in self.backends if b.healthy]
        if not ready:
            return []
        start = next(self._turn) % len(ready)
        turned = ready[start:] + ready[:start]
        return sorted(turned, key=lambda b: b.connections)  # stable: the turn breaks ties

    async def _accepted(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(client_reader, client_writer)
        finally:
            self._tasks.discard(task)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.open_connections >= self.max_connections:
            self.metrics.refused.labels("max_connections").inc()
            await _close(client_writer)
            return
        self.open_connections += 1
        try:
            upstream = await self._dial()
            if upstream is None:
                self.metrics.refused.labels("no_ready_apiserver").inc()
                await _close(client_writer)
                return
            backend, reader, writer = upstream
            backend.connections += 1
            self.metrics.accepted.labels(backend.name).inc()
            self.metrics.open.labels(backend.name).set(backend.connections)
            try:
                await _splice(client_reader, client_writer, reader, writer)
            finally:
                backend.connections -= 1
                self.metrics.open.labels(backend.name).set(backend.connections)
        finally:
            self.open_connections -= 1

    async def _dial(self) -> tuple[Backend, asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to the first candidate that takes one; a refusal takes it out of rotation."""
        for backend in self.candidates():
            try:
                async with asyncio.timeout(self.connect_timeout):
                    reader, writer = await asyncio.open_connection(backend.host, backend.port, limit=CHUNK)
                return backend, reader, writer
            except (OSError, TimeoutError) as e:
                self._set_health(backend, f"connect: {type(e).__name__}: {e}")
        return None


async def _splice(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until both ends are done; an error either way ends both."""
    try:
        async with asyncio.TaskGroup() as copies:
            copies.create_task(_copy(client_reader, upstream_writer))
            copies.create_task(_copy(upstream_reader, client_writer))
    except* OSError:  # ConnectionResetError and its kind: the other way was cancelled
        pass
    finally:
        await asyncio.gather(_close(client_writer), _close(upstream_writer))


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from `reader` to `writer` with back-pressure; the EOF passed on as a half-close."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof() and not writer.is_closing():
            writer.write_eof()
    except OSError:
        writer.close()
        raise


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), 2.0)
