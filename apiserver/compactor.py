"""Storage compaction, as kube-apiserver does it: every interval, compact to the revision the
store had one interval ago, so history stays bounded while every watcher that keeps up (and
every continue token younger than the interval) can still be served."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from apiserver.storage.interface import CompactedError, Storage, StorageError

log = logging.getLogger("raftkube.apiserver")

DEFAULT_INTERVAL = 300.0  # kube-apiserver's --etcd-compaction-interval


async def compact_forever(
    storage: Storage,
    interval: float = DEFAULT_INTERVAL,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    max_rounds: int | None = None,
) -> None:
    previous = 0
    rounds = 0
    while max_rounds is None or rounds < max_rounds:
        rounds += 1
        try:
            current = await storage.current_revision()
            if previous:
                with contextlib.suppress(CompactedError):  # another apiserver compacted it already
                    await storage.compact(previous)
            previous = current
        except StorageError as e:
            log.warning("compaction skipped this round: %s", e)
        await sleep(interval)
