"""Watch requests and responses (etcd v3 shapes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from store.api.kv import Event
from store.api.wire import Fields, check_int


class WatchFilter(IntEnum):
    NOPUT = 0
    NODELETE = 1


@dataclass(slots=True)
class WatchCreateRequest:
    """Watch [key, range_end) from `start_revision` (0: from the next revision on)."""

    key: bytes
    range_end: bytes = b""
    start_revision: int = 0
    progress_notify: bool = False
    filters: list[WatchFilter] = field(default_factory=list)
    prev_kv: bool = False
    watch_id: int = 0
    """0: the member picks an id."""

    def to_wire(self) -> list[Any]:
        return [
            self.key,
            self.range_end,
            self.start_revision,
            self.progress_notify,
            [int(f) for f in self.filters],
            self.prev_kv,
            self.watch_id,
        ]

    @staticmethod
    def from_wire(w: Any, path: str = "watch") -> WatchCreateRequest:
        f = Fields(w, path, 7)
        key, range_end, start = f.blob("key"), f.blob("range_end"), f.integer("start_revision")
        progress_notify = f.flag("progress_notify")
        raw, fpath = f.array("filters", max_len=len(WatchFilter))
        filters = []
        for i, v in enumerate(raw):
            filters.append(WatchFilter(check_int(v, f"{fpath}[{i}]", 0, max(WatchFilter))))
        return WatchCreateRequest(
            key, range_end, start, progress_notify, filters, f.flag("prev_kv"), f.integer("watch_id")
        )


@dataclass(slots=True)
class WatchResponse:
    """One batch for one watcher: all events of a revision are always in the same response.

    `revision` is the store revision the batch is current to; a response with no events,
    not created and not canceled, is a progress notification (bookmark) at `revision`.
    """

    watch_id: int
    revision: int
    events: list[Event] = field(default_factory=list)
    created: bool = False
    canceled: bool = False
    compact_revision: int = 0
    cancel_reason: str = ""

    def to_wire(self) -> list[Any]:
        return [
            self.watch_id,
            self.revision,
            [e.to_wire() for e in self.events],
            self.created,
            self.canceled,
            self.compact_revision,
            self.cancel_reason,
        ]

    @staticmethod
    def from_wire(w: list[Any]) -> WatchResponse:
        return WatchResponse(w[0], w[1], [Event.from_wire(e) for e in w[2]], w[3], w[4], w[5], w[6])

    @property
    def is_progress_notify(self) -> bool:
        return not self.events and not self.created and not self.canceled
