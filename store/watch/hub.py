"""The watch hub: every watcher of one member, fed by the apply loop, drained by the server.

Modelled on etcd's watchableStore.  Watchers are either *synced* (they get each revision's
events as `notify` delivers it) or *unsynced* (they are behind: a watch from an old revision,
or a watcher whose buffer overflowed); `sync_unsynced` replays history to unsynced watchers
in bounded batches until they reach the current revision and rejoin the synced group.

Nothing here blocks or waits: `notify` only appends to bounded buffers, and the server pulls
responses with `drain`.  Synced watchers with the same spec (key, range, filters, prev_kv)
share one `Feed`: each event is matched and appended once for all of them, and watchers at
the same place in it are given the very same list of events (see store/watch/feed.py), so
the apply loop's cost does not grow with the number of watchers of a prefix.  A watcher that
falls more than the buffer behind loses its queued events and becomes unsynced at the first
revision it has not been given; it then catches up from the store's history.  So a slow
watcher costs memory bounded by the buffer and never holds up the apply loop or other
watchers.

Guarantees, per watcher: events come in revision order, without duplicates or gaps, all
events of a revision in one response (a response may hold several revisions), from any
start revision above the compaction point.  A start at or below the compaction point, or an
unsynced watcher overtaken by compaction, ends the watch with a canceled response carrying
`compact_revision`.

The server must call `notify` for every applied revision, in order, and `restore` after it
replaces the store with a snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Protocol

from store.api.errors import InvalidArgumentError, KeyEmptyError
from store.api.kv import Event
from store.api.watch import WatchCreateRequest, WatchResponse
from store.mvcc.keyrange import check_range, upper_bound
from store.watch.feed import Feed, Spec, spec_of
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
        self._synced: WatcherGroup[Feed] = WatcherGroup()
        """The feeds of the synced watchers, indexed by what they watch."""
        self._feeds: dict[Spec, Feed] = {}
        self._unsynced: WatcherGroup[Watcher] = WatcherGroup()
        self._unsynced_ws: dict[Watcher, None] = {}
        # Watchers with output of their own (head, catch-up buffer, final) and feeds with
        # events not yet given to every member, each in round-robin order.
        self._ready: dict[Watcher, None] = {}
        self._ready_feeds: dict[Feed, None] = {}
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
        """Number of watchers and feeds with responses waiting for `drain`."""
        return len(self._ready) + len(self._ready_feeds)

    def deliverable(self, held: Held | None = None) -> bool:
        """Whether `drain` would give something now to a watcher that is not `held`."""
        if held is None:
            return self.pending() > 0
        if any(not held(w) for w in self._ready):
            return True
        for feed in self._ready_feeds:
            end = feed.end
            if any(w.cursor < end and not held(w) for w in feed.members):
                return True
        return False

    def backlog(self, watch_id: int) -> int:
        """Events queued for a watcher (its own buffer and, when synced, its feed)."""
        w = self._watchers.get(watch_id)
        if w is None:
            return 0
        return len(w.buffer) + (w.feed.behind(w) if w.feed is not None else 0)

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
        ready = self._ready_feeds
        for feed, evs in self._synced.match(events).items():
            feed.events.extend(evs)
            feed.busy = True
            ready[feed] = None
            if len(feed.events) > cap:  # only then can a member be that far behind
                self._evict_laggards(feed)

    def _evict_laggards(self, feed: Feed) -> None:
        """Members more than the buffer behind leave the feed and catch up from history,
        from the first revision they have not been given (one revision bigger than the
        buffer alone is still given whole)."""
        cap = self.buffer_events
        end = feed.end
        last = feed.events[-1].kv.mod_revision
        for w in list(feed.members):
            if end - w.cursor > cap:
                first = feed.events[w.cursor - feed.start].kv.mod_revision
                if first == last:
                    continue
                w.min_rev = max(w.min_rev, first)
                self._leave(w)
                self._join_unsynced(w)
                if not w.has_output():
                    self._ready.pop(w, None)
        feed.trim()

    def _desync_all(self) -> None:
        """Every synced watcher catches up from history from now on (what it was queued so
        far stays queued, in its own buffer)."""
        for w in list(self._watchers.values()):
            if w.synced:
                assert w.feed is not None
                w.buffer.extend(e for e in w.feed.pending_events(w) if e.kv.mod_revision >= w.min_rev)
                w.min_rev = max(w.min_rev, self._rev + 1)
                self._leave(w)
                self._join_unsynced(w)
                if w.has_output():
                    self._ready[w] = None

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
                take = _whole_revisions(evs, 0, cap - len(w.buffer), allow_over=not w.buffer)
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

    def progress_if_all_synced(self, watch_ids: list[int]) -> int | None:
        """etcd's RequestProgressAll for one stream: when every watcher of `watch_ids` is synced
        with nothing queued, one progress notification, at the revision all of them have been
        sent, is queued on the first of them and its id returned.  Otherwise, or when there are
        no watchers, nothing is queued (etcd drops the request too; the client asks again)."""
        ws = [self._watchers.get(i) for i in watch_ids]
        synced = [w for w in ws if w is not None and w.synced and not w.has_output()]
        if not ws or len(synced) != len(ws):
            return None
        rev = min(self._covered(w) for w in synced)
        if any(rev < w.min_rev - 1 for w in synced):
            return None
        first = synced[0]
        first.head.append(WatchResponse(first.id, rev))
        self._ready[first] = None
        return first.id

    def progress_tick(self) -> int:
        """The periodic round for watchers created with progress_notify: those that got no events
        since the last round get a progress notification.  Returns how many were queued."""
        due: list[Watcher] = []
        for w in self._watchers.values():
            if w.progress_notify:
                if w.busy or (w.feed is not None and w.feed.busy):
                    w.busy = False
                else:
                    due.append(w)
        for feed in self._feeds.values():
            feed.busy = False
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
            # Watchers with output of their own: created and progress responses, what is
            # left of a catch-up, the response that ends the watch.
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
                    take = _whole_revisions(buf, 0, budget, allow_over=True)
                    take = _within_bytes(buf, 0, take, max_bytes)
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
            # The feeds: the events of one feed are cut once for all members at one place.
            feeds = self._ready_feeds
            for feed in list(feeds):
                if budget <= 0:
                    break
                del feeds[feed]
                budget = yield from self._drain_feed(feed, budget, max_bytes, held)
                feed.trim()
                if feed.events:  # after a trim, only what a member was not given is left
                    feeds[feed] = None  # members left behind (held, or over budget): later
        finally:
            for w in skipped:
                ready[w] = None

    def _drain_feed(
        self, feed: Feed, budget: int, max_bytes: int, held: Held | None
    ) -> Generator[WatchResponse, None, int]:
        """Responses for the members of `feed`; returns the budget left."""
        events, start = feed.events, feed.start
        n = len(events)
        at: dict[int, list[Watcher]] = {}
        for w in feed.members:
            # A member with output of its own (a head, the end of a catch-up) is served that
            # first: it gets its feed events on a later round, in order.
            if w.cursor < start + n and not w.head and not w.buffer:
                at.setdefault(w.cursor, []).append(w)
        for cursor, ws in at.items():
            if budget <= 0:
                break
            i = cursor - start
            take = _whole_revisions(events, i, budget, allow_over=True)
            take = _within_bytes(events, i, take, max_bytes)
            chunk = events[i : i + take]
            budget -= take
            full = i + take == n
            first, last = chunk[0].kv.mod_revision, chunk[-1].kv.mod_revision
            for w in ws:
                if held is not None and held(w):
                    continue
                w.cursor = cursor + take
                mine = chunk if w.min_rev <= first else [e for e in chunk if e.kv.mod_revision >= w.min_rev]
                if mine:
                    yield WatchResponse(w.id, self._covered(w) if full else last, mine)
        return budget

    def _covered(self, w: Watcher) -> int:
        """The revision up to which `w` has been given (or has queued) every event it wants:
        what a bookmark or the revision of a fully drained response may claim."""
        if not w.synced:
            return w.min_rev - 1
        feed = w.feed
        if feed is not None and w.cursor < feed.start + len(feed.events):
            # Events of its feed still to come (that it wants): only what precedes them is covered.
            for i in range(w.cursor - feed.start, len(feed.events)):
                rev = feed.events[i].kv.mod_revision
                if rev >= w.min_rev:
                    return rev - 1
        # A synced watcher has everything notified so far, and, if it joined from a catch-up
        # that went past the last notify, everything up to where the catch-up ended.
        return max(self._rev, min(w.min_rev - 1, self._src.current_revision))

    # ------------------------------------------------------------------ internals
    def _join_synced(self, w: Watcher) -> None:
        spec = spec_of(w)
        feed = self._feeds.get(spec)
        if feed is None:
            feed = self._feeds[spec] = Feed(w)
            self._synced.add(feed)
        feed.members[w] = None
        w.feed = feed
        w.cursor = feed.end
        w.synced = True

    def _join_unsynced(self, w: Watcher) -> None:
        w.synced = False
        self._unsynced.add(w)
        self._unsynced_ws[w] = None

    def _leave(self, w: Watcher) -> None:
        """Out of its group; a synced watcher's place in its feed (and what it had not been
        given there) goes with it."""
        if w.synced:
            feed = w.feed
            assert feed is not None
            del feed.members[w]
            w.feed = None
            if not feed.members:
                self._synced.remove(feed)
                del self._feeds[feed.spec]
                self._ready_feeds.pop(feed, None)
        else:
            self._unsynced.remove(w)
            del self._unsynced_ws[w]


def _within_bytes(evs: list[Event], i: int, take: int, max_bytes: int) -> int:
    """`take` events from evs[i] on, cut back so that their keys and values stay within about
    `max_bytes`, never splitting a revision and always keeping the first revision whole."""
    total = 0
    for j in range(i, i + take):
        kv = evs[j].kv
        prev = evs[j].prev_kv
        total += len(kv.key) + len(kv.value) + (len(prev.value) if prev is not None else 0)
        if total > max_bytes and j > i:
            n = j
            cut = evs[n].kv.mod_revision
            while n > i and evs[n - 1].kv.mod_revision == cut:
                n -= 1
            if n == i:  # the first revision alone is over: it goes whole
                n = i + 1
                first = evs[i].kv.mod_revision
                while n < i + take and evs[n].kv.mod_revision == first:
                    n += 1
            return n - i
    return take


def _whole_revisions(evs: list[Event], i: int, room: int, *, allow_over: bool) -> int:
    """How many events from evs[i] on fit in `room` without splitting a revision.  With
    `allow_over`, at least the first whole revision is taken even if it alone exceeds `room`."""
    avail = len(evs) - i
    if avail <= room:
        return avail
    if room <= 0:
        n = i
    else:
        n = i + room
        # back off to the start of the revision that `room` cuts through
        cut = evs[n].kv.mod_revision
        while n > i and evs[n - 1].kv.mod_revision == cut:
            n -= 1
    if n == i and allow_over:
        first = evs[i].kv.mod_revision
        n = i + 1
        while n < len(evs) and evs[n].kv.mod_revision == first:
            n += 1
    return n - i
