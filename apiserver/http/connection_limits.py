"""Timeouts and a ceiling on connections, enforced where the bytes arrive (uvicorn's protocol).

Uvicorn bounds only the idle time between a response and the next request's first byte
(`timeout_keep_alive`): a client that opens a connection and sends nothing, or sends a
request's headers one byte at a time, or declares a body and never finishes it, holds a
socket, a TLS session (~0.25 MiB: asyncio's per-connection TLS read buffer) and a parser for
ever.  500 such clients kept 500 connections and +137 MiB in the apiserver indefinitely.

This subclass of uvicorn's httptools protocol adds what Go's net/http gives kube-apiserver:

- `header_timeout` (Go's ReadHeaderTimeout; kube sets 32 s): from the connection's start, or
  from the first byte of a kept-alive connection's next request, until the request's header
  block is complete.  The clock does not restart on each byte, so dribbling bytes does not keep
  a connection alive.
  Our default is 10 s: clients (client-go, kubectl, our components) send a header block in one
  write, so 10 s is only ever reached by a broken or hostile client, and it frees slots three
  times as fast as kube's.
- `body_timeout`: from the end of the headers until the body is complete.  Kube's 60 s request
  timeout covers this; a 3 MiB body takes far less on any link the API is used over.
- `idle_timeout`: uvicorn's keep-alive timeout, passed through: how long a connection may wait,
  silent, for its next request.  Kube sets 90 s (Go's IdleTimeout), the same as the idle timeout
  of Go's client transports, and so do we.  A server that gives up on idle connections sooner
  than its clients races them: a client that reuses a connection the server is closing gets an
  EOF, and Go retries only idempotent requests, so a POST (an eviction from `kubectl drain`
  retrying every 5 s against a 5 s idle timeout) fails outright.  Idle connections cost a
  socket and a TLS session each and are bounded by `max_connections`.
- `max_connections`: a connection past the ceiling is closed as soon as it is made (before a
  byte is read), so the number of parsers, TLS sessions and buffers is bounded whatever the
  clients do; the timeouts keep hostile connections from holding the slots for long.

A timed-out connection is dropped (aborted) without an answer, as Go's server does on a read deadline;
the app sees the client leave (`http.disconnect`).  The TLS handshake comes before this
protocol exists: apiserver.main gives the listening server `ssl_handshake_timeout` =
`header_timeout` (asyncio's default is 60 s), so a client that never sends its hello is cut
off in the same time, as Go's ReadHeaderTimeout covers the handshake too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("raftkube.apiserver.connections")


@dataclass(frozen=True)
class ConnectionLimits:
    """The edge's timeouts (seconds) and connection ceiling; see the module docstring."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0
    idle_timeout: float = 90.0
    max_connections: int = 10_000

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "idle_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {self.max_connections}")


class _RefusalLog:
    """Says that connections are being refused at most once a minute (a flood must not fill the log)."""

    def __init__(self) -> None:
        self.last = -LOG_EVERY_S
        self.count = 0

    def note(self, limit: int) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last >= LOG_EVERY_S:
            log.warning("refused %d connection(s) since the last notice: %d are open, the limit", self.count, limit)
            self.last, self.count = now, 0


LOG_EVERY_S = 60.0
_refused = _RefusalLog()


def note_refused(limit: int) -> None:
    """A connection past `limit` was refused (said at most once a minute); HTTP/2's protocol too."""
    _refused.note(limit)


def guarded(base: type[asyncio.Protocol], limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """`base` (uvicorn's httptools protocol, or a subclass of it) with `limits` enforced."""
    if not all(hasattr(base, hook) for hook in ("on_message_begin", "on_headers_complete", "on_message_complete")):
        raise TypeError(f"{base.__name__} is not uvicorn's httptools protocol (httptools is a dependency)")
    proto: Any = base  # uvicorn's protocol attributes (connections, cycle, transport) are untyped here

    class Guarded(proto):  # type: ignore[misc]
        _header_timer: asyncio.TimerHandle | None = None
        _body_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                note_refused(limits.max_connections)
                transport.abort()
                return
            self._arm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_timers()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            # a kept-alive connection's next request has begun: its headers are due (on a new
            # connection the clock has run since connection_made)
            if self._header_timer is None:
                self._arm_header_timer()

        def on_headers_complete(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
            super().on_headers_complete()
            if self.cycle is not None and self.cycle.scope is self.scope and self.cycle.more_body:
                self._body_timer = self.loop.call_later(limits.body_timeout, self._timed_out, "body")

        def on_message_complete(self) -> None:
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None
            super().on_message_complete()

        def _arm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._header_timer = self.loop.call_later(limits.header_timeout, self._timed_out, "header")

        def _cancel_timers(self) -> None:
            for timer in (self._header_timer, self._body_timer):
                if timer is not None:
                    timer.cancel()
            self._header_timer = self._body_timer = None

        def _timed_out(self, what: str) -> None:
            self._header_timer = self._body_timer = None
            transport = self.transport
            # after a WebSocket upgrade the transport belongs to another protocol: not ours to close
            if transport is None or transport.is_closing() or transport.get_protocol() is not self:
                return
            log.info("closed a connection from %s: the request %s was not received in time", self.client, what)
            transport.abort()  # not close(): a TLS close waits (up to 30 s) for the peer's close_notify

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded
