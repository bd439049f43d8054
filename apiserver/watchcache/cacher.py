"""One resource's watch cache: the objects and recent events, fed by one storage watch.

The feed lists the resource (paged, at one revision), then watches from the next revision.
Every batch is decoded once, applied to the state, appended to the window and offered to the
watchers it concerns; nothing in that path awaits, so a list or a new watch always sees the
state and the window at one revision.  A storage watch that ends is resumed from the next
revision (the Protocol promises no gap); one that is compacted forces a re-list, and every open
watch is then ended with ERROR 410 Expired so its client re-lists too: never a silent gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.canary import WatchEventDropper
from apiserver.errors import StatusError, bad_request, gone, too_many_requests, unavailable
from apiserver.objects import from_storage
from apiserver.resources.base import ResourceDef
from apiserver.storage.interface import CompactedError, Progress, Storage, StorageError, StorageEvent, Stored
from apiserver.watchcache import continuation
from apiserver.watchcache.events import CacheEvent, Entry, WatchEvent, at_revision, make_entry
from apiserver.watchcache.filter import FieldMatcher, Filter, LabelMatcher
from apiserver.watchcache.history import History
from apiserver.watchcache.index import WatcherIndex
from apiserver.watchcache.state import State
from apiserver.watchcache.watcher import CacheWatcher, initial_backlog, replay_backlog
from machinery.clock import Clock, SystemClock
from machinery.objects import Obj

log = logging.getLogger(__name__)

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
CONVERSION_BATCH = 500  # objects per conversion webhook call when the cache fills or follows
WATCH_EXPIRED = "The resourceVersion for the provided watch is too old."


@dataclass(frozen=True, slots=True)
class CacheList:
    items: list[Obj]  # shared with the cache: do not mutate
    resource_version: int
    continue_token: str  # "" on the last page
    remaining: int | None  # items after this page; None on the last page or when a selector filters


def default_fields(resource: ResourceDef) -> Callable[[Obj], Mapping[str, str]]:
    """The fields a field selector may name: metadata.name, metadata.namespace (namespaced) and the
    resource's own (what `apiserver.resources.base.object_fields` gives)."""

    def fields_of(obj: Obj) -> Mapping[str, str]:
        meta = obj.get("metadata") or {}
        out = {"metadata.name": str(meta.get("name") or "")}
        if resource.namespaced:
            out["metadata.namespace"] = str(meta.get("namespace") or "")
        out.update(resource.fields(obj))
        return out

    return fields_of


def parse_resource_version(text: str) -> int | None:
    """None for unset, else the revision; 400 when it is not a non-negative integer."""
    if text == "":
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        raise bad_request(f'invalid resource version: "{text[:64]}" is not a non-negative integer')
    return int(text)


def too_large(wanted: int, current: int) -> StatusError:
    """504, as kube-apiserver words it when the cache did not reach a revision in time."""
    return StatusError(
        504,
        "Timeout",
        f"Too large resource version: {wanted}, current: {current}",
        {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version", "field": ""}],
            "retryAfterSeconds": 1,
        },
    )


class Cacher:
    """Serves LIST and WATCH for one resource from memory (see the module docstring)."""

    def __init__(
        self,
        storage: Storage,
        resource: ResourceDef,
        *,
        capacity: int = 10_000,
        watcher_buffer: int = 1_000,
        list_page: int = 1_000,
        fresh_timeout: float = 3.0,
        bookmark_interval: float = 1.0,
        retry_delay: float = 0.1,
        max_retry_delay: float = 5.0,
        clock: Clock | None = None,
        fields_of: Callable[[Obj], Mapping[str, str]] | None = None,
    ) -> None:
        if watcher_buffer < 1 or list_page < 1:
            raise ValueError("watcher_buffer and list_page must be at least 1")
        self.resource = resource
        self._storage = storage
        self._prefix = resource.key_prefix()
        self._history = History(capacity)
        self._state = State()
        self._watchers = WatcherIndex()
        self._watcher_buffer = watcher_buffer
        self._list_page = list_page
        self._fresh_timeout = fresh_timeout
        self._bookmark_interval = bookmark_interval
        self._retry_delay = retry_delay
        self._max_retry_delay = max_retry_delay
        self._clock: Clock = clock or SystemClock()
        self._fields_of = fields_of or default_fields(resource)
        self._revision = 0
        self._ready = False
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._attempted = asyncio.Event()
        self.relists = 0  # how many times the state was (re)listed
        self._generation = 0  # goes up whenever the current objects change
        self._fed = False  # the current attempt got something from the storage watch
        self._canary = WatchEventDropper(resource.plural)

    # ---- life cycle -------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether the state is listed and followed (lists and watches wait for it, bounded)."""
        return self._ready

    @property
    def revision(self) -> int:
        """The revision the cache has seen every change up to."""
        return self._revision

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    @property
    def generation(self) -> int:
        """Goes up whenever the current objects change (not on progress alone): readers that
        derive something from `objects()` rebuild it only when this moved."""
        return self._generation

    def objects(self, namespace: str | None = None) -> Iterator[Obj]:
        """The current objects in key order, as stored (shared: callers must not change them);
        with `namespace`, only that namespace's (a key-range scan, not a filter)."""
        prefix = self.resource.key_prefix(namespace) if namespace else self._prefix
        for entry in self._state.scan(prefix):
            yield entry.object

    def get_object(self, namespace: str | None, name: str) -> Obj | None:
        """The current object of that name, or None (the cache's view, not a fresh read)."""
        entry = self._state.get(self.resource.key(namespace, name))
        return None if entry is None else entry.object

    async def start(self) -> None:
        """Start the feed and the bookmark ticker; returns once the first list succeeded or failed
        (on failure the feed keeps retrying, with backoff, and `ready` says when it is done)."""
        if self._tasks:
            return
        self._tasks = [asyncio.create_task(self._run()), asyncio.create_task(self._bookmark_loop())]
        await self._attempted.wait()

    async def stop(self) -> None:
        """Stop feeding; every open watch ends after what it already has queued."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._ready = False
        for watcher in self._watchers.all():
            watcher.end()
        self._notify()

    # ---- the feed ---------------------------------------------------------------------------

    async def _run(self) -> None:
        delay = self._retry_delay
        need_list = True
        while True:
            self._fed = False
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                    self._attempted.set()
                    delay = self._retry_delay
                await self._follow()
                # The watch ended without error: resume from the next revision.  The Protocol
                # promises no gap, and a compacted start raises CompactedError (then we re-list).
                failed = False
            except CompactedError as exc:
                log.info("watch cache %s: storage compacted (%s), re-listing", self._prefix, exc)
                self._expire()
                need_list, failed = True, True
            except StorageError as exc:
                log.warning("watch cache %s: storage failed (%s), retrying", self._prefix, exc)
                failed = True
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("watch cache %s: feed failed, re-listing", self._prefix)
                self._expire()
                need_list, failed = True, True
            if self._fed:
                delay = self._retry_delay  # it made progress: retry at once
                continue
            self._attempted.set()
            if failed or not need_list:
                # Nothing came through since the last attempt: back off (bounded) before the next.
                await self._clock.sleep(delay)
                delay = min(delay * 2, self._max_retry_delay)

    def _expire(self) -> None:
        """The cache cannot continue from where it is: not ready, and every watch ends with 410."""
        self._ready = False
        for watcher in self._watchers.all():
            watcher.fail(gone(WATCH_EXPIRED))
        self._notify()

    async def _relist(self) -> None:
        self._expire()
        entries: list[Entry] = []
        start, revision = "", 0
        while True:
            page = await self._storage.list(self._prefix, start_key=start, limit=self._list_page, revision=revision)
            if revision == 0:
                revision = page.revision
            for item in page.items:
                entry = self._decode(item)
                if entry is not None:
                    entries.append(entry)
            if not page.more or not page.items:
                break
            start = page.items[-1].key + "\x00"
        entries = await self._converted(entries)
        self._state.replace(entries)
        self._generation += 1
        self._fed = True
        self._history.reset(revision)
        self._revision = revision
        self._ready = True
        self.relists += 1
        self._notify()

    def _decode(self, item: Stored) -> Entry | None:
        try:
            obj = self.resource.read_view(from_storage(item.value, item.revision))
        except ValueError:
            log.error("watch cache %s: %s holds no JSON object; left out", self._prefix, item.key)
            return None
        return make_entry(item.key, obj, self._fields_of)

    async def _converted(self, entries: list[Entry]) -> list[Entry]:
        """Entries in the resource's version when reaching it takes a call (a CRD's conversion
        webhook): converted in batches, so a relist of many objects is a few calls."""
        convert = self.resource.convert_for_serving
        if convert is None or not entries:
            return entries
        out: list[Entry] = []
        for at in range(0, len(entries), CONVERSION_BATCH):
            batch = entries[at : at + CONVERSION_BATCH]
            objs = await convert([e.object for e in batch])
            out.extend(make_entry(e.key, o, self._fields_of) for e, o in zip(batch, objs, strict=True))
        return out

    async def _follow(self) -> None:
        async for item in self._storage.watch(self._prefix, self._revision + 1):
            self._fed = True
            if isinstance(item, Progress):
                self._advance(item.revision)
            elif self.resource.convert_for_serving is not None:
                puts = [
                    e
                    for ev in item
                    if ev.type == "put"
                    and ev.revision > self._revision
                    and (e := self._decode(Stored(ev.key, ev.value, ev.revision))) is not None
                ]
                done = await self._converted(puts)
                converted = {(e.key, (e.object.get("metadata") or {}).get("resourceVersion")): e for e in done}
                self._apply(item, converted)
            else:
                self._apply(item)

    def _advance(self, revision: int) -> None:
        if revision > self._revision:
            self._revision = revision
            self._notify()

    def _apply(self, batch: list[StorageEvent], converted: dict[tuple[str, Any], Entry] | None = None) -> None:
        """`converted`: the batch's puts already decoded and converted, by (key, resourceVersion)."""
        changes: list[CacheEvent] = []
        for ev in batch:
            if ev.revision <= self._revision:
                continue  # already seen (a resumed watch may repeat)
            change = self._change(ev, converted)
            if change is not None:
                self._history.append(change)
                changes.append(change)
                self._generation += 1
            self._revision = max(self._revision, ev.revision)
        for change in changes:
            if self._canary.armed and self._canary.drops(change.entry.key):
                continue  # only under a chaos run's canary (apiserver/canary.py)
            for watcher in self._watchers.concerned(change):
                watcher.offer(change)
        self._notify()

    def _change(self, ev: StorageEvent, converted: dict[tuple[str, Any], Entry] | None = None) -> CacheEvent | None:
        old = self._state.get(ev.key)
        if ev.type == "put":
            if converted is not None:
                entry = converted.get((ev.key, str(ev.revision)))
            else:
                entry = self._decode(Stored(ev.key, ev.value, ev.revision))
            if entry is None:
                return None
            self._state.put(entry)
            return CacheEvent("ADDED" if old is None else "MODIFIED", entry, old, ev.revision)
        if old is None:
            return None  # a key the cache never had (left out as undecodable)
        self._state.delete(ev.key)
        return CacheEvent("DELETED", at_revision(old, ev.revision), old, ev.revision)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _bookmark_loop(self) -> None:
        while True:
            await self._clock.sleep(self._bookmark_interval)
            self.send_bookmarks()

    def send_bookmarks(self) -> None:
        """Offer a BOOKMARK at the current revision to each watcher that asked for bookmarks and
        has not been told of this revision yet (the ticker calls this every `bookmark_interval`)."""
        if not self._ready:
            return
        revision = self._revision
        shared: WatchEvent | None = None
        for watcher in self._watchers.all():
            if watcher.allow_bookmarks and revision > watcher.last_revision:
                shared = shared or self._bookmark(revision)
                watcher.offer_bookmark(shared, revision)

    def _bookmark(self, revision: int, *, initial_end: bool = False) -> WatchEvent:
        meta: dict[str, Any] = {"resourceVersion": str(revision)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return WatchEvent(
            "BOOKMARK", {"kind": self.resource.kind, "apiVersion": self.resource.group_version, "metadata": meta}
        )

    # ---- waiting, bounded -------------------------------------------------------------------

    async def _until(self, ok: Callable[[], bool], seconds: float) -> bool:
        deadline = self._clock.now() + seconds
        while not ok():
            left = deadline - self._clock.now()
            if left <= 0:
                return False
            changed = asyncio.ensure_future(self._changed.wait())
            sleeper = asyncio.ensure_future(self._sleep(left))
            try:
                await asyncio.wait({changed, sleeper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                sleeper.cancel()
        return True

    async def _sleep(self, seconds: float) -> None:
        await self._clock.sleep(seconds)

    async def _wait_ready(self) -> None:
        if not await self._until(lambda: self._ready, self._fresh_timeout):
            raise too_many_requests("storage is (re)initializing", 1)

    async def _wait_fresh(self, revision: int) -> None:
        """Until the cache has seen `revision` (and is ready); 504 Too large resource version if not in time."""
        await self._wait_ready()
        if self._revision >= revision:
            return
        # An idle resource's watch gets no events: ask it to say how far it has delivered.
        with contextlib.suppress(StorageError):
            await self._storage.request_progress()
        if not await self._until(lambda: self._ready and self._revision >= revision, self._fresh_timeout):
            if not self._ready:
                raise too_many_requests("storage is (re)initializing", 1)
            raise too_large(revision, self._revision)

    async def _current_revision(self) -> int:
        try:
            return await self._storage.current_revision()
        except StorageError as exc:
            raise unavailable(f"the storage cannot say its current revision: {exc}") from exc

    async def _compacted(self, revision: int) -> bool:
        """Whether the storage compacted `revision` away.  The cache could still serve it, but a
        continue token lives only as long as the storage keeps its revision (kube 1.33 reads
        every continued page from etcd): clients rely on the 410 to learn that their pages no
        longer make one snapshot.  One key's read at that revision asks the storage."""
        if revision >= self._revision:
            return False  # nothing at or after the newest revision is compacted
        try:
            await self._storage.list(self._prefix, limit=1, revision=revision)
        except CompactedError:
            return True
        except StorageError as exc:
            raise unavailable(f"the storage cannot say whether revision {revision} is compacted: {exc}") from exc
        return False

    # ---- LIST -------------------------------------------------------------------------------

    def _filter(self, namespace: str | None, labels: LabelMatcher | None, fields: FieldMatcher | None) -> Filter:
        return Filter.of(namespace if self.resource.namespaced else None, labels, fields)

    async def list(
        self,
        *,
        namespace: str | None = None,
        labels: LabelMatcher | None = None,
        fields: FieldMatcher | None = None,
        resource_version: str = "",
        match: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> CacheList:
        """A page of the matching objects in key order (see the package docstring for the rules)."""
        if limit < 0:
            raise bad_request("limit must not be negative")
        filt = self._filter(namespace, labels, fields)
        start = ""
        if continue_token:
            if resource_version not in ("", "0"):
                raise bad_request("specifying resource version is not allowed when using continue")
            if match:
                raise bad_request("resourceVersionMatch is forbidden when continue is provided")
            token = continuation.decode(continue_token)
            if token.revision == continuation.LATEST:
                await self._wait_fresh(await self._current_revision())
                revision = self._revision
            else:
                await self._wait_fresh(token.revision)
                if not self._history.covers(token.revision) or await self._compacted(token.revision):
                    raise gone(continuation.TOO_OLD, continuation.encode(continuation.expired(token)))
                revision = token.revision
            start = self._prefix + token.start
        else:
            rv = parse_resource_version(resource_version)
            if match not in ("", "Exact", "NotOlderThan"):
                raise bad_request(
                    f'resourceVersionMatch: Unsupported value: "{match[:64]}": supported values: '
                    '"Exact", "NotOlderThan"'
                )
            if match and rv is None:
                raise bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
            if match == "Exact":
                if rv == 0:
                    raise bad_request('resourceVersionMatch "Exact" is forbidden for resourceVersion "0"')
                assert rv is not None
                await self._wait_fresh(rv)
                if not self._history.covers(rv):
                    raise gone(f"too old resource version: {rv} ({self._history.floor})")
                revision = rv
            else:
                if rv is None:
                    rv = await self._current_revision()
                await self._wait_fresh(rv)
                revision = self._revision
        return self._page(filt, revision, start, limit)

    def _page(self, filt: Filter, revision: int, start: str, limit: int) -> CacheList:
        """Runs without awaiting: the state and the window are read at one instant."""
        overlay = self._history.overlay(revision) if revision < self._revision else {}
        items: list[Obj] = []
        last_key = ""
        more = 0
        for entry in self._state.scan_at(overlay, self.resource.key_prefix(filt.namespace), start):
            if not filt.matches(entry):
                continue
            if limit and len(items) >= limit:
                more += 1
                if filt.selective:
                    break  # only whether one more exists matters: remaining stays unset
                continue
            items.append(entry.object)
            last_key = entry.key
        if not more:
            return CacheList(items, revision, "", None)
        token = continuation.encode(continuation.Continue(revision, last_key[len(self._prefix) :] + "\x00"))
        return CacheList(items, revision, token, None if filt.selective else more)

    # ---- WATCH ------------------------------------------------------------------------------

    async def watch(
        self,
        *,
        namespace: str | None = None,
        labels: LabelMatcher | None = None,
        fields: FieldMatcher | None = None,
        resource_version: str = "",
        allow_bookmarks: bool = False,
        send_initial_events: bool | None = None,
    ) -> CacheWatcher:
        """A watch of the matching objects; the caller iterates it and `close()`s it when done."""
        filt = self._filter(namespace, labels, fields)
        rv = parse_resource_version(resource_version)
        if rv is None:
            # Unset = consistent: start from (at least) the store's current revision.  If the cache
            # cannot confirm it in time (an idle resource on a backend without progress notices),
            # start from what it has: later changes still come as events, so there is no gap.
            try:
                await self._wait_fresh(await self._current_revision())
            except StatusError as err:
                if err.code != 504:
                    raise
        elif rv > 0:
            # A revision the cache has not seen: wait for it (bounded), then 504 "Too large
            # resource version", as kube's cacher answers a watch (and a list) from the future,
            # instead of a stream that stays silent until revisions catch up with the number.
            await self._wait_fresh(rv)
        else:
            await self._wait_ready()
        # From here on nothing awaits: the snapshot or replay and the registration are one instant.
        initial = send_initial_events if send_initial_events is not None else rv in (None, 0)
        if initial:
            entries = list(self._state.scan(self.resource.key_prefix(filt.namespace)))
            end = self._bookmark(self._revision, initial_end=True) if send_initial_events else None
            after, backlog = self._revision, initial_backlog(entries, filt, end)
        elif rv is None or rv == 0:
            after, backlog = self._revision, iter(())
        else:
            if not self._history.covers(rv):
                raise gone(f"too old resource version: {rv} ({self._history.floor})")
            after, backlog = max(rv, self._revision), replay_backlog(self._history.since(rv), filt)
        watcher = CacheWatcher(
            filt,
            after=after,
            backlog=backlog,
            buffer_size=self._watcher_buffer,
            allow_bookmarks=allow_bookmarks,
            on_close=self._watchers.remove,
        )
        self._watchers.add(watcher)
        return watcher
