"""One watcher: what it watches, where it stands in the revision stream, what it has queued.

Position: `min_rev` is the first revision whose events the watcher still needs.  For an
unsynced watcher it is exact (catch-up resumes there).  For a synced one it is only a floor
set when it joined (future start revisions, or the revision after a catch-up): the hub skips
events below it, and afterwards every notified revision is delivered as it happens, so the
hub does not touch watchers that an event does not match.

Output, drained in this order: `head` (created or progress responses), `buffer` (events,
whole revisions, oldest first, at most the hub's buffer size unless one revision alone is
bigger), then `final` (the canceled response that ends the watch).  A synced watcher's live
events are not in `buffer` but in its `feed` (shared with every synced watcher of the same
spec), from its `cursor` on; `buffer` then only holds what is left of a catch-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.api.kv import Event, EventType
from store.api.watch import WatchFilter, WatchResponse

if TYPE_CHECKING:
    from store.watch.feed import Feed


class Watcher:
    __slots__ = (
        "buffer",
        "busy",
        "cursor",
        "feed",
        "filtered",
        "final",
        "head",
        "hi",
        "id",
        "key",
        "min_rev",
        "no_delete",
        "no_put",
        "prev_kv",
        "progress_notify",
        "range_end",
        "synced",
    )

    def __init__(
        self,
        watch_id: int,
        key: bytes,
        range_end: bytes,
        hi: bytes | None,
        *,
        filters: list[WatchFilter],
        prev_kv: bool,
        progress_notify: bool,
        min_rev: int,
    ) -> None:
        self.id = watch_id
        self.key = key
        self.range_end = range_end
        """etcd encoding: b"" a single key, b"\\0" every key >= key."""
        self.hi = hi
        """Exclusive upper bound of a range watch (None: unbounded); unused for a single key."""
        self.no_put = WatchFilter.NOPUT in filters
        self.no_delete = WatchFilter.NODELETE in filters
        self.filtered = self.no_put or self.no_delete
        """Has a filter at all: the hot loop skips `wants` for the (usual) watcher without."""
        self.prev_kv = prev_kv
        self.progress_notify = progress_notify
        self.min_rev = min_rev
        self.synced = False
        self.buffer: list[Event] = []
        self.head: list[WatchResponse] = []
        self.final: WatchResponse | None = None
        self.busy = False
        """Got events since the last periodic progress round (etcd skips those watchers)."""
        self.feed: Feed | None = None
        """While synced: the feed it reads its live events from."""
        self.cursor = 0
        """While synced: the position in `feed` of the next event it is to be given."""

    def __repr__(self) -> str:
        state = "synced" if self.synced else "unsynced"
        return f"Watcher({self.id}, {self.key!r}..{self.range_end!r}, min_rev={self.min_rev}, {state})"

    @property
    def single(self) -> bool:
        return not self.range_end

    def wants(self, ev: Event) -> bool:
        """The NOPUT / NODELETE filters."""
        return not (self.no_put if ev.type is EventType.PUT else self.no_delete)

    def has_output(self) -> bool:
        feed = self.feed
        return bool(self.head or self.buffer or self.final is not None or (feed is not None and self.cursor < feed.end))
