"""One client's watch: a backlog (initial objects or window replay) then a bounded live buffer.

The dispatcher never waits for a watcher: `offer` appends or, when the buffer is full, ends the
watch with an ERROR event (410 Expired) so the client re-lists.  Kubernetes' cacher closes such
a watcher after a short blocking budget; here the budget is the buffer, and the ERROR makes
the reason explicit instead of a silent end that the client would resume into the same backlog.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from apiserver.errors import StatusError, gone
from apiserver.watchcache.events import CacheEvent, Entry, WatchEvent
from apiserver.watchcache.filter import Filter


def error_event(err: StatusError) -> WatchEvent:
    return WatchEvent("ERROR", err.to_status())


def too_slow(limit: int) -> StatusError:
    return gone(f"too slow: the watch fell {limit} events behind and was closed; list again")


class CacheWatcher:
    """Async iterator of WatchEvent; `close()` ends it (idempotent).  Iteration stops after an ERROR."""

    def __init__(
        self,
        filt: Filter,
        *,
        after: int,
        backlog: Iterator[WatchEvent],
        buffer_size: int,
        allow_bookmarks: bool,
        on_close: Callable[[CacheWatcher], None],
    ) -> None:
        self.filter = filt
        self.after = after  # live events at or below this revision are not for this watcher
        self.allow_bookmarks = allow_bookmarks
        self.last_revision = after  # the newest revision queued (bookmarks only go forward)
        self._backlog: Iterator[WatchEvent] | None = backlog
        self._buffer: deque[WatchEvent] = deque()
        self._buffer_size = buffer_size
        self._wake = asyncio.Event()
        self._closed = False  # no more events will be queued
        self._on_close = on_close

    @property
    def closed(self) -> bool:
        return self._closed

    def offer(self, event: CacheEvent) -> None:
        """Queue what this watcher sees of `event` (called by the dispatcher, never blocks)."""
        if self._closed or event.revision <= self.after:
            return
        seen = self.filter.transform(event)
        if seen is None:
            return
        if len(self._buffer) >= self._buffer_size:
            self.fail(too_slow(self._buffer_size))
            return
        self._buffer.append(seen)
        self.last_revision = event.revision
        self._wake.set()

    def offer_bookmark(self, bookmark: WatchEvent, revision: int) -> None:
        """A progress bookmark: best effort, skipped when the buffer is full or it would not advance."""
        if self._closed or revision <= self.last_revision or len(self._buffer) >= self._buffer_size:
            return
        self._buffer.append(bookmark)
        self.last_revision = revision
        self._wake.set()

    def fail(self, err: StatusError) -> None:
        """End the watch with an ERROR event carrying `err` (pending events are dropped: the client re-lists)."""
        if self._closed:
            return
        self._backlog = None
        self._buffer.clear()
        self._buffer.append(error_event(err))
        self._finish()

    def end(self) -> None:
        """End after what is already queued (the cache is stopping)."""
        if not self._closed:
            self._finish()

    def close(self) -> None:
        """The client is gone: drop everything."""
        self._backlog = None
        self._buffer.clear()
        self.end()

    def _finish(self) -> None:
        self._closed = True
        self._wake.set()
        self._on_close(self)

    def __aiter__(self) -> CacheWatcher:
        return self

    def poll(self) -> WatchEvent | None:
        """The next event if one is ready now, else None (lets a writer send what is ready in one go)."""
        if self._backlog is not None:
            item = next(self._backlog, None)
            if item is not None:
                return item
            self._backlog = None
        if self._buffer:
            event = self._buffer.popleft()
            if event.type == "ERROR":
                self._buffer.clear()
            return event
        return None

    @property
    def finished(self) -> bool:
        """Closed and nothing left to read."""
        return self._closed and self._backlog is None and not self._buffer

    async def __anext__(self) -> WatchEvent:
        while True:
            event = self.poll()
            if event is not None:
                return event
            if self._closed:
                raise StopAsyncIteration
            self._wake.clear()
            await self._wake.wait()

    def __repr__(self) -> str:
        info: dict[str, Any] = {"after": self.after, "queued": len(self._buffer), "closed": self._closed}
        return f"CacheWatcher({info})"


def initial_backlog(entries: list[Entry], filt: Filter, end: WatchEvent | None) -> Iterator[WatchEvent]:
    """ADDED for each matching entry (a snapshot taken at registration), then `end` if given."""
    for entry in entries:
        if filt.matches(entry):
            yield entry.added()
    if end is not None:
        yield end


def replay_backlog(events: list[CacheEvent], filt: Filter) -> Iterator[WatchEvent]:
    """What the watcher sees of the window's events after its start revision."""
    for event in events:
        seen = filt.transform(event)
        if seen is not None:
            yield seen
