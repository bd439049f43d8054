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


async def stream(
    watcher: Any,
    encode_key: str,
    make: Callable[[Any], bytes],
    timeout_seconds: int,
) -> AsyncIterator[bytes]:
    deadline = time.monotonic() + (timeout_seconds or MAX_TIMEOUT_SECONDS)
    iterator = watcher.__aiter__()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                event = await asyncio.wait_for(iterator.__anext__(), left)
            except (StopAsyncIteration, TimeoutError):
                return
            yield event.encoded(encode_key, make)
    finally:
        watcher.close()
