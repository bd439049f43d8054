"""A feed: the live events of one watch spec, shared by every synced watcher with that spec.

A thousand watchers of one prefix (the common case: every controller of a kind watches the
same range) used to cost a thousand list appends per event in the apply path, and a frame
built from a thousand different lists per dispatch.  A feed matches and filters each event
once for all of them: watchers only hold a cursor into its event list, and watchers at the
same cursor are sent the very same list (whose encoding the frame encoder then reuses).

The list keeps the events from the slowest member's cursor on; a member that falls more
than the hub's buffer behind is moved off the feed (to catch up from history), so a watcher
that is not read never makes a feed grow without bound.
"""

from __future__ import annotations

from store.api.kv import Event, EventType
from store.watch.watcher import Watcher

Spec = tuple[bytes, bytes, bool, bool, bool]
"""What a feed selects: key, range_end, no_put, no_delete, prev_kv."""


def spec_of(w: Watcher) -> Spec:
    return (w.key, w.range_end, w.no_put, w.no_delete, w.prev_kv)


class Feed:
    __slots__ = (
        "busy",
        "events",
        "filtered",
        "hi",
        "key",
        "members",
        "min_rev",
        "no_delete",
        "no_put",
        "prev_kv",
        "range_end",
        "spec",
        "start",
    )

    def __init__(self, w: Watcher) -> None:
        self.spec = spec_of(w)
        # The attributes a WatcherGroup matches on, as a watcher has them.
        self.key = w.key
        self.range_end = w.range_end
        self.hi = w.hi
        self.no_put = w.no_put
        self.no_delete = w.no_delete
        self.filtered = w.filtered
        self.prev_kv = w.prev_kv
        self.min_rev = 0
        """Feeds take every revision; each member's own floor is applied when it is served."""
        self.events: list[Event] = []
        self.start = 0
        """The position (since the feed began) of events[0]; cursors are positions."""
        self.members: dict[Watcher, None] = {}
        self.busy = False
        """Got events since the last periodic progress round."""

    def __repr__(self) -> str:
        return f"Feed({self.key!r}..{self.range_end!r}, members={len(self.members)}, events={len(self.events)})"

    @property
    def single(self) -> bool:
        return not self.range_end

    def wants(self, ev: Event) -> bool:
        return not (self.no_put if ev.type is EventType.PUT else self.no_delete)

    @property
    def end(self) -> int:
        return self.start + len(self.events)

    def behind(self, w: Watcher) -> int:
        """Events of this feed that member `w` has not been given."""
        return self.start + len(self.events) - w.cursor

    def pending_events(self, w: Watcher) -> list[Event]:
        return self.events[w.cursor - self.start :]

    def trim(self) -> None:
        """Drop the events every member has been given: afterwards `events` holds exactly
        what the member furthest behind has yet to get."""
        lo = min((w.cursor for w in self.members), default=self.end)
        if lo > self.start:
            del self.events[: lo - self.start]
            self.start = lo
