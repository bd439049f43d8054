"""Running a set of controllers over one informer factory (the manager's core, and tests')."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from components.client.informer import InformerFactory
from components.client.rest import RestClient
from components.controllers.base import Controller
from machinery.clock import Clock

SYNC_TIMEOUT_S = 60.0


class ControllerMaker(Protocol):
    """A controller class, or one with its own options bound (`functools.partial`): the runner
    supplies only what every controller shares."""

    def __call__(self, client: RestClient, factory: InformerFactory, *, clock: Clock | None = None) -> Controller: ...


class InformersNotSynced(Exception):
    """The informers did not hold a whole state within the time allowed."""


@contextlib.asynccontextmanager
async def running(
    client: RestClient,
    controllers: Sequence[ControllerMaker],
    *,
    clock: Clock | None = None,
    sync_timeout: float = SYNC_TIMEOUT_S,
) -> AsyncIterator[list[Controller]]:
    """The controllers, reconciling, for the duration of the block; informers synced first
    (a controller that acted on a half-filled store would create what already exists)."""
    factory = InformerFactory(client, clock=clock)
    made = [make(client, factory, clock=clock) for make in controllers]
    tasks: list[asyncio.Task[None]] = []
    try:
        for c in made:
            await c.prepare()
        factory.start()
        if not await factory.wait_for_sync(sync_timeout):
            raise InformersNotSynced(f"informers not synced within {sync_timeout:.0f} s")
        tasks = [asyncio.create_task(c.run(), name=c.name) for c in made]
        yield made
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await factory.stop()
