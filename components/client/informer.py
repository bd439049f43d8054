"""Shared informers: one reflector per resource per process, an indexed store, and handlers.

client-go's promise, ours too: the store converges to the server's state; handlers see every
change the store goes through, in order, at least as far as the final state of each object
(intermediate states may be skipped after a re-list).  A re-list *replaces* the store: objects
gone meanwhile are reported deleted, changed ones updated.  Handlers run inline and must be
quick (they enqueue keys into a work queue); one that raises is logged, not fatal.

Delivery from the server may repeat or arrive late (a duplicate after a reconnect, an older
copy from a lagging cache): an object older than the one held, by resourceVersion, is ignored,
and so is a re-added object older than its recorded deletion.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from components.client.indexer import Indexer, IndexFunc, key_of, resource_version
from components.client.listwatch import ListWatch, Resource, RestListWatch
from components.client.reflector import Reflector
from components.client.rest import RestClient
from machinery.clock import Clock, SystemClock
from machinery.objects import Obj

log = logging.getLogger("raftkube.client")
TOMBSTONES_KEPT = 10_000  # deletions remembered (to refuse late re-adds); cleared by a re-list


@dataclass
class EventHandler:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class SharedInformer:
    """The store of one resource, fed by its reflector, shared by every controller in a process."""

    def __init__(
        self,
        name: str,
        source: ListWatch,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        use_watch_list: bool = True,
    ) -> None:
        self.name = name
        self.indexer = Indexer(indexers)
        self.reflector = Reflector(name, source, self, clock=clock, rng=rng, use_watch_list=use_watch_list)
        self._handlers: list[EventHandler] = []
        self._tombstones: dict[str, int] = {}
        self._floor = 0  # the last replace's resourceVersion: older copies of absent objects are gone
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- for controllers --------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        """Handlers added after the first sync are first told about every object held (as adds)."""
        self._handlers.append(handler)
        if self._synced.is_set() and handler.on_add is not None:
            for _, obj in self.indexer.items():
                self._call(handler.on_add, obj)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.reflector.run(), name=f"reflector {self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # -- the reflector's sink ----------------------------------------------------------------

    def replace(self, items: list[Obj], resource_version_: str) -> None:
        fresh = {key_of(obj): obj for obj in items}
        for key in [k for k in self.indexer if k not in fresh]:
            gone = self.indexer.remove(key)
            if gone is not None:
                self._notify_delete(gone)
        for key, obj in fresh.items():
            old = self.indexer.get(key)
            if old is not None and resource_version(old) == resource_version(obj) and resource_version(obj):
                continue
            self.indexer.put(obj)
            if old is None:
                self._notify_add(obj)
            else:
                self._notify_update(old, obj)
        self._tombstones.clear()
        self._floor = int(resource_version_) if resource_version_.isdigit() else 0
        self._synced.set()

    def apply(self, event_type: str, obj: Obj) -> None:
        key, rv = key_of(obj), resource_version(obj)
        held = self.indexer.get(key)
        if event_type in ("ADDED", "MODIFIED"):
            if held is not None and rv and rv <= resource_version(held):
                return  # a duplicate or a late copy
            if held is None and rv and rv <= max(self._floor, self._tombstones.get(key, 0)):
                return  # a late copy of something already deleted (by the last re-list, or since)
            self._tombstones.pop(key, None)
            self.indexer.put(obj)
            if held is None:
                self._notify_add(obj)
            else:
                self._notify_update(held, obj)
        elif event_type == "DELETED":
            if held is None or (rv and rv < resource_version(held)):
                return
            self.indexer.remove(key)
            if rv:
                self._tombstones[key] = rv
                if len(self._tombstones) > TOMBSTONES_KEPT:
                    del self._tombstones[next(iter(self._tombstones))]
            self._notify_delete(obj)

    # -- handlers -----------------------------------------------------------------------------

    def _notify_add(self, obj: Obj) -> None:
        for h in self._handlers:
            if h.on_add is not None:
                self._call(h.on_add, obj)

    def _notify_update(self, old: Obj, new: Obj) -> None:
        for h in self._handlers:
            if h.on_update is not None:
                self._call(h.on_update, old, new)

    def _notify_delete(self, obj: Obj) -> None:
        for h in self._handlers:
            if h.on_delete is not None:
                self._call(h.on_delete, obj)

    def _call(self, fn: Callable[..., None], *args: Obj) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("%s: an event handler failed", self.name)


class InformerFactory:
    """One informer per (resource, selectors) per process, however many controllers ask."""

    def __init__(
        self,
        client: RestClient,
        *,
        namespace: str | None = None,
        clock: Clock | None = None,
        use_watch_list: bool = True,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.clock = clock or SystemClock()
        self.use_watch_list = use_watch_list
        self._informers: dict[tuple[Resource, str, str], SharedInformer] = {}

    def informer(self, resource: Resource, *, label_selector: str = "", field_selector: str = "") -> SharedInformer:
        key = (resource, label_selector, field_selector)
        found = self._informers.get(key)
        if found is None:
            source = RestListWatch(
                self.client,
                resource,
                namespace=self.namespace,
                label_selector=label_selector,
                field_selector=field_selector,
            )
            name = resource.plural + (f".{resource.group}" if resource.group else "")
            found = SharedInformer(name, source, clock=self.clock, use_watch_list=self.use_watch_list)
            self._informers[key] = found
        return found

    def informers(self) -> list[SharedInformer]:
        return list(self._informers.values())

    def start(self) -> None:
        """Start every informer asked for so far (again after asking for more)."""
        for informer in self._informers.values():
            informer.start()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Whether every started informer synced within `timeout` seconds."""
        try:
            await asyncio.wait_for(asyncio.gather(*(i.wait_synced() for i in self._informers.values())), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self._informers.values()))
