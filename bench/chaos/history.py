"""The store's own history of a run: every change under /registry/ from revision 1, read with
a watch from the store itself (not through an apiserver, whose behaviour is what is checked),
until the run's end marker.  The apiserver compacts only what is older than its compaction
interval (5 minutes) at each interval, so a run shorter than that keeps every revision.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from store.api.kv import EventType
from store.client.client import Client
from store.client.layout import StoreLayout

READ_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Change:
    revision: int
    key: str
    deleted: bool
    obj: dict[str, Any] | None
    """The object as stored (None for a delete)."""


async def read_history(data_dir: Path, end_key: str) -> list[Change]:
    """Every change under /registry/ up to and including the one to `end_key`."""
    layout = StoreLayout(data_dir)
    endpoints = [u.split("://", 1)[-1] for u in layout.client_urls()]
    changes: list[Change] = []
    async with Client(endpoints, timeout=10.0, tls=layout.client_tls()) as client:
        watch = client.watch(b"/registry/", prefix=True, start_revision=1)
        async with asyncio.timeout(READ_TIMEOUT_S):
            async for response in watch:
                if response.canceled:
                    raise RuntimeError(
                        f"the store cancelled the history watch ({response.cancel_reason or 'compacted'},"
                        f" compact revision {response.compact_revision}): the run outlived the history"
                    )
                done = False
                for e in response.events:
                    key = e.kv.key.decode("utf-8", "replace")
                    deleted = e.type == EventType.DELETE
                    obj = None if deleted else orjson.loads(e.kv.value)
                    changes.append(Change(e.kv.mod_revision, key, deleted, obj))
                    done = done or key == end_key
                if done:
                    break
        await watch.cancel()
    return changes
