"""The shape of every controller: informers feed keys into a work queue; workers reconcile them.

A controller declares its informers and handlers in `setup` (handlers only enqueue keys), and
implements `reconcile(key)`.  A reconcile that raises is retried with the queue's per-key
exponential back-off; one that returns is forgotten (its back-off reset); `Requeue(after=s)`
asks for another look later without counting as a failure.  The queue never hands one key to
two workers, so a reconcile owns its key while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from components.client.events import EventRecorder
from components.client.indexer import key_of
from components.client.informer import InformerFactory
from components.client.rest import ApiError, ConflictError, RestClient, TransportError
from components.client.workqueue import RateLimitingQueue, ShutDown, default_controller_rate_limiter
from machinery.clock import Clock, SystemClock
from machinery.objects import Obj

log = logging.getLogger("raftkube.controllers")


class Requeue(Exception):
    """Look at this key again after `after` seconds (not a failure: no back-off growth)."""

    def __init__(self, after: float) -> None:
        super().__init__(f"requeue after {after:.1f} s")
        self.after = after


class Controller:
    """Subclasses set `name`, implement `setup` and `reconcile`; `events` reports what they did
    as kube's `<name>-controller` does."""

    name = "controller"
    workers = 2

    def __init__(self, client: RestClient, factory: InformerFactory, *, clock: Clock | None = None) -> None:
        self.client = client
        self.factory = factory
        self.clock = clock or SystemClock()
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(
            default_controller_rate_limiter(self.clock), clock=self.clock
        )
        self.events = EventRecorder(client, f"{self.name}-controller", "")
        # counters for /metrics
        self.reconciles = 0
        self.failures = 0
        self.setup()

    def setup(self) -> None:
        """Ask the factory for informers and add handlers that call `enqueue`."""
        raise NotImplementedError

    async def prepare(self) -> None:
        """Set-up that needs the apiserver (discovery), before the informers start: optional."""

    async def reconcile(self, key: str) -> None:
        raise NotImplementedError

    def enqueue(self, obj: Obj) -> None:
        self.queue.add(key_of(obj))

    async def run(self, workers: int | None = None) -> None:
        """Workers until cancelled; the queue shuts down on the way out."""
        tasks = [
            asyncio.create_task(self._worker(), name=f"{self.name} worker {i}") for i in range(workers or self.workers)
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            self.queue.shut_down(drain=False)
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, ShutDown):
                    await t

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                await self.reconcile(key)
                self.queue.forget(key)
            except Requeue as r:
                self.queue.forget(key)
                self.queue.add_after(key, r.after)
            except asyncio.CancelledError:
                raise
            except ConflictError:
                # someone wrote the object since our informer saw it: look again (no log noise)
                self.queue.add_rate_limited(key)
            except (ApiError, TransportError) as e:
                self.failures += 1
                log.warning("%s: %s: %s", self.name, key, e)
                self.queue.add_rate_limited(key)
            except Exception:
                self.failures += 1
                log.exception("%s: reconciling %s failed", self.name, key)
                self.queue.add_rate_limited(key)
            finally:
                self.reconciles += 1
                self.queue.done(key)
