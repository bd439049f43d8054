"""The watch hub: every watcher of one member, fed by the apply loop, drained by the server.

Modelled on etcd's watchableStore.  Watchers are either *synced* (they get each revision's
events as `notify` delivers it) or *unsynced* (they are behind: a watch from an old revision,
or a watcher whose buffer overflowed); `sync_unsynced` replays history to unsynced watchers
in bounded batches until they reach the current revision and rejoin the synced group.

Nothing here blocks or waits: `notify` only appends to bounded per-watcher buffers, and the
server pulls responses with `drain`.  A watcher whose buffer would overflow loses its
buffered events and becomes unsynced at the first revision it has not been given; it then
catches up from the store's history.  So a slow watcher costs memory bounded by its buffer
and never holds up the apply loop or other watchers.

Guarantees, per watcher: events come in revision order, without duplicates or gaps, all
events of a revision in one response (a response may hold several revisions), from any
start revision above the compaction point.  A start at or below the compaction point, or an
unsynced watcher overtaken by compaction, ends the watch with a canceled response carrying
`compact_revision`.

The server must call `notify` for every applied revision, in order, and `restore` after it
replaces the store with a snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from store.api.errors import InvalidArgumentError, KeyEmptyError
from store.api.kv import Event
from store.api.watch import WatchCreateRequest, WatchResponse
from store.mvcc.keyrange import check_range, upper_bound
from store.watch.group import WatcherGroup
from store.watch.watcher import Watcher

DEFAULT_BUFFER_EVENTS = 1000
"""Events a watcher may have waiting for `drain` before it is moved to unsynced."""

DEFAULT_SYNC_REVISIONS = 1000
"""Revisions of history replayed per `sync_unsynced` call (etcd's 1000-revision batches)."""

DEFAULT_RESPONSE_BYTES = 1 << 20
"""About how many bytes of keys and values one response carries at most (a single revision
may exceed it: revisions are never split)."""

COMPACTED_REASON = "mvcc: required revision has been compacted"

Held = Callable[[Watcher], bool]
"""Says which watchers must not be given output now (their client is not reading): they
keep their place and catch up later, from their buffer or from history."""


class History(Protocol):
    """What the hub needs from the store (KVStore satisfies it)."""

    @property
    def current_revision(self) -> int: ...

    @property
    def compact_revision(self) -> int: ...

    def events_between(
        self, start_rev: int, end_rev: int, key: bytes | None = None, range_end: bytes = b"", limit: int = 0
    ) -> list[Event]: ...


class WatchHub:
    def __init__(
        self,
        source: History,
        *,
        buffer_events: int = DEFAULT_BUFFER_EVENTS,
        sync_revisions: int = DEFAULT_SYNC_REVISIONS,
    ) -> None:
        self._src = source
        self.buffer_events = buffer_events
        self.sync_revisions = sync_revisions
        self._watchers: dict[int, Watcher] = {}
        # Ended watchers whose final response was not drained yet: their ids stay taken.
        self._closing: dict[int, Watcher] = {}
        self._synced = WatcherGroup()
        self._unsynced = WatcherGroup()
        self._unsynced_ws: dict[Watcher, None] = {}
        # Watchers with output for `drain`, in round-robin order.
        self._ready: dict[Watcher, None] = {}
        self._rev = source.current_revision
        """The last revision given to `notify` (or the store's revision when the hub started)."""
        self._next_id = 1

    # ------------------------------------------------------------------ queries
    @property
    def revision(self) -> int:
        return self._rev

    def watcher_count(self) -> int:
        return len(self._watchers)

    def unsynced_count(self) -> int:
        return len(self._unsynced_ws)

    def pending(self) -> int:
        """Number of watchers with responses waiting for `drain`."""
        return len(self._ready)

    def ready_watchers(self) -> Iterable[Watcher]:
        """The watchers with responses waiting for `drain` (a live view)."""
        return self._ready.keys()

    def get(self, watch_id: int) -> Watcher | None:
        return self._watchers.get(watch_id)

    # ------------------------------------------------------------------ watchers
    def create(self, req: WatchCreateRequest) -> int:
        """Start a watch; returns its id.  Its `created` response is the first `drain` yields for
        it.  A start revision at or below the compaction point gives a watch that is created and
        canceled in the same response, with `compact_revision` set.

        start_revision 0 watches from the next revision; a future start waits for it."""
        if not req.key:
            raise KeyEmptyError("etcdserver: key is not provided")
        check_range(req.key, req.range_end)
        if req.start_revision < 0:
            raise InvalidArgumentError(f"start_revision {req.start_revision} is negative")
        wid = req.watch_id
        if wid == 0:
            while self._next_id in self._watchers or self._next_id in self._closing:
                self._next_id += 1
            wid = self._next_id
            self._next_id += 1
        elif wid < 0 or wid in self._watchers or wid in self._closing:
            raise InvalidArgumentError("mvcc: duplicate watch ID provided on the WatchStream")
        cur = self._src.current_revision
        compact = self._src.compact_revision
        start = req.start_revision
        w = Watcher(
            wid,
            req.key,
            req.range_end,
            upper_bound(req.range_end) if req.range_end else None,
            filters=req.filters,
            prev_kv=req.prev_kv,
            progress_notify=req.progress_notify,
            min_rev=start,
        )
        if start and start <= compact:
            w.final = WatchResponse(
                wid, cur, created=True, canceled=True, compact_revision=compact, cancel_reason=COMPACTED_REASON
            )
            self._closing[wid] = w
            self._ready[w] = None
            return wid
        w.head.append(WatchResponse(wid, cur, created=True))
        self._watchers[wid] = w
        if start == 0 or start > cur:
            w.min_rev = max(start, cur + 1)
            self._join_synced(w)
        else:
            self._join_unsynced(w)
        self._ready[w] = None
        return wid

    def cancel(self, watch_id: int) -> WatchResponse | None:
        """End a watch at the client's request; its queued output is dropped.  Returns the
        canceled response for the server to send, None if there is no such watch."""
        w = self._watchers.pop(watch_id, None)
        if w is None:
            ended = self._closing.pop(watch_id, None)
            if ended is not None:
                self._ready.pop(ended, None)
            return None
        self._leave(w)
        self._ready.pop(w, None)
        return WatchResponse(watch_id, self._rev, canceled=True)

    # ------------------------------------------------------------------ the write path
    def notify(self, revision: int, events: list[Event]) -> None:
        """The events of one applied revision, from KVStore.put/delete_range/txn/revoke_lease_keys.

        Revisions must come in order; one at or below the last notified is ignored.  A skipped
        revision (the caller missed a notify) is not lost: every synced watcher falls back to
        catching up from history."""
        if revision <= self._rev or not events:
            return
        if revision > self._rev + 1:
            self._desync_all()
        self._rev = revision
        if not len(self._synced):
            return
        cap = self.buffer_events
        for w, evs in self._synced.match(events).items():
            buf = w.buffer
            if buf and len(buf) + len(evs) > cap:
                self._overflow(w, revision)
                continue
            buf.extend(evs)
            w.busy = True
            self._ready[w] = None

    def _overflow(self, w: Watcher, revision: int) -> None:
        # The client has every event before the first buffered one (or before `revision` when
        # the buffer is empty); restart from there, from history.
        w.min_rev = w.buffer[0].kv.mod_revision if w.buffer else revision
        w.buffer.clear()
        self._synced.remove(w)
        self._join_unsynced(w)
        if not w.has_output():
            self._ready.pop(w, None)

    def _desync_all(self) -> None:
        for w in list(self._watchers.values()):
            if w.synced:
                w.min_rev = max(w.min_rev, self._rev + 1)
                self._synced.remove(w)
                self._join_unsynced(w)

    def restore(self, source: History) -> None:
        """The store was replaced (a snapshot was installed): read history from `source` now.
        Every synced watcher catches up from the new store, or is canceled if the revision it
        needs was compacted away."""
        self._src = source
        if source.current_revision > self._rev:
            self._desync_all()
            self._rev = source.current_revision

    # ------------------------------------------------------------------ catching up
    def sync_unsynced(self, max_revisions: int | None = None, held: Held | None = None) -> int:
        """Replay at most `max_revisions` revisions of history to the unsynced watchers that have
        room in their buffers (and are not `held`); watchers that reach the current revision
        rejoin the synced group.  Returns how many watchers got new output (events or a final
        canceled response)."""
        if not self._unsynced_ws:
            return 0
        src = self._src
        cur = src.current_revision
        compact = src.compact_revision
        touched = 0
        cap = self.buffer_events
        candidates: list[Watcher] = []
        for w in list(self._unsynced_ws):
            if compact and w.min_rev <= compact:
                self._end_compacted(w, cur, compact)
                touched += 1
            elif w.min_rev > cur:
                self._leave(w)
                self._join_synced(w)
            elif len(w.buffer) < cap and (held is None or not held(w)):
                candidates.append(w)
        if not candidates:
            return touched
        lo = min(w.min_rev for w in candidates)
        hi = min(lo + (max_revisions or self.sync_revisions), cur + 1)
        batches = self._unsynced.match(src.events_between(lo, hi))
        for w in candidates:
            evs = batches.get(w)
            if evs:
                take = _whole_revisions(evs, cap - len(w.buffer), allow_over=not w.buffer)
                w.buffer.extend(evs[:take] if take < len(evs) else evs)
                if take < len(evs):
                    w.min_rev = evs[take].kv.mod_revision
                else:
                    w.min_rev = max(w.min_rev, hi)
                if take:
                    w.busy = True
                    self._ready[w] = None
                    touched += 1
            else:
                w.min_rev = max(w.min_rev, hi)
            if w.min_rev > cur:
                self._leave(w)
                self._join_synced(w)
        return touched

    def _end_compacted(self, w: Watcher, cur: int, compact: int) -> None:
        del self._watchers[w.id]
        self._closing[w.id] = w
        self._leave(w)
        w.final = WatchResponse(w.id, cur, canceled=True, compact_revision=compact, cancel_reason=COMPACTED_REASON)
        self._ready[w] = None

    # ------------------------------------------------------------------ progress
    def request_progress(self, watch_id: int = 0) -> int:
        """Queue a progress notification (an empty response at the last notified revision) for
        one watcher, or every watcher for 0.  Only a synced watcher with nothing queued gets one:
        a bookmark must never claim a revision whose events the client has not been sent (etcd
        bug #15220).  Returns how many were queued."""
        ws = self._watchers.values() if watch_id == 0 else [w for w in [self._watchers.get(watch_id)] if w]
        return self._queue_progress(ws)

    def progress_tick(self) -> int:
        """The periodic round for watchers created with progress_notify: those that got no events
        since the last round get a progress notification.  Returns how many were queued."""
        due: list[Watcher] = []
        for w in self._watchers.values():
            if w.progress_notify:
                if w.busy:
                    w.busy = False
                else:
                    due.append(w)
        return self._queue_progress(due)

    def _queue_progress(self, ws: Iterable[Watcher]) -> int:
        """A watcher whose start revision is ahead of this member (a watch resumed here from a
        member that was further along) gets no bookmark until the member reaches the start: a
        bookmark below start - 1 would move the client's stream backwards (etcd does the same)."""
        n = 0
        for w in ws:
            if w.synced and not w.has_output():
                rev = self._covered(w)
                if rev < w.min_rev - 1:
                    continue
                w.head.append(WatchResponse(w.id, rev))
                self._ready[w] = None
                n += 1
        return n

    # ------------------------------------------------------------------ delivery
    def drain(self, max_events: int = 1000, max_bytes: int = DEFAULT_RESPONSE_BYTES) -> list[WatchResponse]:
        """Every response `drain_iter` yields now, as a list."""
        return list(self.drain_iter(max_events, max_bytes))

    def drain_iter(
        self, max_events: int = 1000, max_bytes: int = DEFAULT_RESPONSE_BYTES, held: Held | None = None
    ) -> Iterator[WatchResponse]:
        """Responses ready to send, taking about `max_events` events in all and about
        `max_bytes` per response (never splitting a revision), round-robin over watchers so
        that one busy watcher cannot starve the others.  Lazy: `held` is asked about each
        watcher just before it is served, so it can see what the consumer did with the
        responses already yielded (a connection whose backlog grew meanwhile).  Consume it
        whole: a watcher's place in the round is kept only by running to the end."""
        budget = max_events
        ready = self._ready
        skipped: list[Watcher] = []
        try:
            while ready and budget > 0:
                w = next(iter(ready))
                del ready[w]
                if held is not None and held(w):
                    skipped.append(w)
                    continue
                if w.head:
                    head, w.head = w.head, []
                    yield from head
                buf = w.buffer
                if buf:
                    take = _whole_revisions(buf, budget, allow_over=True)
                    take = _within_bytes(buf, take, max_bytes)
                    if take == len(buf):
                        events = buf[:]
                        buf.clear()
                        rev = self._covered(w)
                    else:
                        events = buf[:take]
                        del buf[:take]
                        rev = events[-1].kv.mod_revision
                    budget -= take
                    if buf:
                        ready[w] = None  # the rest later, after the other watchers
                    yield WatchResponse(w.id, rev, events)
                    if buf:
                        continue
                if w.final is not None and w.id in self._closing:
                    final, w.final = w.final, None
                    del self._closing[w.id]
                    yield final
        finally:
            for w in skipped:
                ready[w] = None

    def _covered(self, w: Watcher) -> int:
        """The revision up to which `w` has been given (or has queued) every event it wants:
        what a bookmark or the revision of a fully drained response may claim."""
        if not w.synced:
            return w.min_rev - 1
        # A synced watcher has everything notified so far, and, if it joined from a catch-up
        # that went past the last notify, everything up to where the catch-up ended.
        return max(self._rev, min(w.min_rev - 1, self._src.current_revision))

    # ------------------------------------------------------------------ internals
    def _join_synced(self, w: Watcher) -> None:
        w.synced = True
        self._synced.add(w)

    def _join_unsynced(self, w: Watcher) -> None:
        w.synced = False
        self._unsynced.add(w)
        self._unsynced_ws[w] = None

    def _leave(self, w: Watcher) -> None:
        if w.synced:
            self._synced.remove(w)
        else:
            self._unsynced.remove(w)
            del self._unsynced_ws[w]


def _within_bytes(evs: list[Event], take: int, max_bytes: int) -> int:
    """`take` cut back so that the events' keys and values stay within about `max_bytes`,
    never splitting a revision and always keeping the first revision whole."""
    total = 0
    for i in range(take):
        kv = evs[i].kv
        prev = evs[i].prev_kv
        total += len(kv.key) + len(kv.value) + (len(prev.value) if prev is not None else 0)
        if total > max_bytes and i > 0:
            n = i
            last = evs[n].kv.mod_revision
            while n > 0 and evs[n - 1].kv.mod_revision == last:
                n -= 1
            if n == 0:  # the first revision alone is over: it goes whole
                n = 1
                first = evs[0].kv.mod_revision
                while n < take and evs[n].kv.mod_revision == first:
                    n += 1
            return n
    return take


def _whole_revisions(evs: list[Event], room: int, *, allow_over: bool) -> int:
    """How many leading events fit in `room` without splitting a revision.  With `allow_over`,
    at least the first whole revision is taken even if it alone exceeds `room`."""
    if len(evs) <= room:
        return len(evs)
    if room <= 0:
        n = 0
    else:
        n = room
        # back off to the start of the revision that `room` cuts through
        last = evs[n].kv.mod_revision
        while n > 0 and evs[n - 1].kv.mod_revision == last:
            n -= 1
    if n == 0 and allow_over:
        first = evs[0].kv.mod_revision
        n = 1
        while n < len(evs) and evs[n].kv.mod_revision == first:
            n += 1
    return n
