"""A watch as an HTTP response: one JSON line per event, until the timeout or the client leaves.

Each event is encoded once per representation (JSON or one-row Table) and the same bytes go
to every watcher that wants them (`WatchEvent.encoded`).  The stream stays open without a
timeoutSeconds (kubectl -w needs that) up to the server's cap.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from apiserver.http.params import MAX_TIMEOUT_SECONDS
from apiserver.resources.base import ResourceDef
from apiserver.table import table


def json_line(event: Any) -> bytes:
    return orjson.dumps({"type": event.type, "object": event.object}) + b"\n"


def table_line(resource: ResourceDef, include_object: str, clock: Callable[[], float]) -> Callable[[Any], bytes]:
    def make(event: Any) -> bytes:
        if event.type in ("BOOKMARK", "ERROR"):
            return json_line(event)
        rows = table(resource, [event.object], now=clock(), include_object=include_object)
        return orjson.dumps({"type": event.type, "object": rows}) + b"\n"

    return make


MAX_EVENTS_PER_WRITE = 256
# Under a stream of events, a watch that just wrote waits this long before its next write, so
# that each wake-up carries many events instead of one: bounded extra latency, and the write
# path (TLS, chunked framing, the event loop) runs per batch rather than per event.
COALESCE_SECONDS = 0.02


class WatchBody:
    """The response body of one watch.  Whatever is queued when the writer wakes goes out in
    one write (fewer syscalls under load); `end` runs once, from the stream's end or from the
    response's background task when the client left before the stream started."""

    def __init__(
        self,
        watcher: Any,
        encode_key: str,
        make: Callable[[Any], bytes],
        timeout_seconds: int,
        on_end: Callable[[], None] = lambda: None,
    ) -> None:
        self.watcher = watcher
        self.encode_key = encode_key
        self.make = make
        self.deadline = time.monotonic() + (timeout_seconds or MAX_TIMEOUT_SECONDS)
        self.on_end = on_end
        self.ended = False
        self.last_write = 0.0

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.watcher.close()
            self.on_end()

    async def chunks(self) -> AsyncIterator[bytes]:
        iterator = self.watcher.__aiter__()
        try:
            while not self.ended:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    return
                try:
                    event = await asyncio.wait_for(iterator.__anext__(), left)
                except (StopAsyncIteration, TimeoutError):
                    return
                if time.monotonic() - self.last_write < COALESCE_SECONDS:
                    await asyncio.sleep(COALESCE_SECONDS)
                parts = [event.encoded(self.encode_key, self.make)]
                while len(parts) < MAX_EVENTS_PER_WRITE and (more := self.watcher.poll()) is not None:
                    parts.append(more.encoded(self.encode_key, self.make))
                self.last_write = time.monotonic()
                yield b"".join(parts)
        finally:
            self.end()
