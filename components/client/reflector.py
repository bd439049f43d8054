"""The reflector: keeps a sink in step with the server by listing, then watching.

Its loop (client-go's ListAndWatch):
1. Get the state: a watch with `sendInitialEvents` when the server offers it (the state
   arrives as ADDED events closed by a bookmark annotated `k8s.io/initial-events-end`), else a
   LIST; either way the sink's content is *replaced* by it.
2. Watch from the last resourceVersion seen (an event's or a bookmark's).  A stream the
   server ends (its timeout) or a connection that breaks is re-opened from that version,
   after a back-off when it failed, without listing again.
3. 410 Gone (the version was compacted away), at the watch or inside it, goes back to 1 with
   a consistent read: the sink never misses a change, it is replaced instead.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable
from typing import Any, Protocol

from components.client.listwatch import ListWatch
from components.client.rest import ApiError, BadRequestError, GoneError, InvalidError, TransportError, WatchEvent
from machinery import objects
from machinery.clock import Clock, SystemClock
from machinery.objects import Obj

log = logging.getLogger("raftkube.client")
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
MIN_WATCH_TIMEOUT_S = 300  # each watch asks the server to end it after 5-10 min (spreads re-watches)
BACKOFF_INITIAL_S = 0.8
BACKOFF_CAP_S = 30.0


class Sink(Protocol):
    def replace(self, items: list[Obj], resource_version: str) -> None:
        """The whole state at `resource_version`: what is not in `items` is gone."""
        ...

    def apply(self, event_type: str, obj: Obj) -> None:
        """One ADDED, MODIFIED or DELETED event."""
        ...


class Backoff:
    """Exponential, capped, jittered delays between failed attempts; reset after a success."""

    def __init__(self, rng: random.Random, initial: float = BACKOFF_INITIAL_S, cap: float = BACKOFF_CAP_S) -> None:
        self.rng, self.initial, self.cap = rng, initial, cap
        self._next = initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * 2)
        return delay * (1 + self.rng.random())

    def reset(self) -> None:
        self._next = self.initial


class Reflector:
    """Runs `list_and_watch` until cancelled; `synced` once the sink holds a whole state."""

    def __init__(
        self,
        name: str,
        source: ListWatch,
        sink: Sink,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        use_watch_list: bool = True,
        min_watch_timeout_s: int = MIN_WATCH_TIMEOUT_S,
    ) -> None:
        self.name = name
        self.source = source
        self.sink = sink
        self.clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self.use_watch_list = use_watch_list
        self.min_watch_timeout_s = min_watch_timeout_s
        self.backoff = Backoff(self.rng)
        self.last_resource_version = ""
        self.synced = False
        # counters a metrics layer reads
        self.lists = 0
        self.watches = 0
        self.relists_on_gone = 0

    async def run(self) -> None:
        need_state = True
        while True:
            try:
                if need_state:
                    await self._get_state()
                    need_state = False
                else:
                    await self._watch(self.last_resource_version)
                self.backoff.reset()
            except GoneError as e:
                log.info("%s: %s; listing again", self.name, e.message or "resourceVersion too old")
                self.relists_on_gone += 1
                need_state = True
                self.last_resource_version = ""
            except (TransportError, ApiError) as e:
                delay = self.backoff.next()
                log.warning("%s: %s; again in %.1f s", self.name, e, delay)
                await self.clock.sleep(delay)

    async def _get_state(self) -> None:
        if self.use_watch_list:
            try:
                await self._watch("", initial=True)
                return
            except (BadRequestError, InvalidError) as e:
                # 400 from servers that predate the option; 422 from kube-apiserver with its
                # WatchList feature gate off (1.33's default), as client-go falls back on both
                log.info("%s: the server does not stream initial events (%s); listing", self.name, e.message)
                self.use_watch_list = False
        self.lists += 1
        listed = await self.source.list("")
        self.sink.replace(listed.items, listed.resource_version)
        self.last_resource_version = listed.resource_version
        self.synced = True

    async def _watch(self, resource_version: str, *, initial: bool = False) -> None:
        """One watch stream, to its end.  With `initial`, its first events are the state."""
        self.watches += 1
        timeout = self.rng.randint(self.min_watch_timeout_s, 2 * self.min_watch_timeout_s)
        stream = self.source.watch(resource_version, timeout_s=timeout, send_initial_events=initial)
        state: list[Obj] | None = [] if initial else None
        try:
            async for event in stream:
                rv = objects.resource_version(event.object)
                if event.type == "BOOKMARK":
                    if state is not None and _initial_events_end(event.object):
                        self.sink.replace(state, rv)
                        self.synced = True
                        state = None
                elif state is not None:
                    if event.type == "ADDED":
                        state.append(event.object)
                    else:  # the state is a set of ADDED events; anything else is a broken server
                        raise TransportError(f"{self.name}: a {event.type} event among the initial events")
                else:
                    self.sink.apply(event.type, event.object)
                if _newer(rv, self.last_resource_version):
                    self.last_resource_version = rv
        finally:
            await _close(stream)
        if state is not None:
            raise TransportError(f"{self.name}: the watch ended before the initial events did")


def _newer(rv: str, than: str) -> bool:
    """Whether to resume from `rv` rather than `than`: a late, older copy never moves it back."""
    if not rv:
        return False
    if rv.isdigit() and than.isdigit():
        return int(rv) > int(than)
    return True


def _initial_events_end(obj: Obj) -> bool:
    return objects.annotations(obj).get(INITIAL_EVENTS_END) == "true"


async def _close(stream: Any) -> None:
    """Close an async generator that was left early (so its connection goes back to the pool)."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        result = aclose()
        if isinstance(result, Awaitable):
            await result


__all__ = ["Backoff", "Reflector", "Sink", "WatchEvent"]
