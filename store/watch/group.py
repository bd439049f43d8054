"""A set of watchers indexed by what they watch, and the matching of events to watchers.

Single-key watchers sit in a dict by key, range watchers in a RangeIndex, so the work per
event is a dict lookup and a bisect plus the watchers that actually match; watchers that do
not match an event are never looked at (etcd's watcherGroup: a map plus an interval tree).
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from store.api.kv import Event
from store.watch.ranges import RangeIndex


class Listener(Protocol):
    """What the group matches on (a Watcher, or a Feed standing for watchers of one spec)."""

    @property
    def single(self) -> bool: ...

    key: bytes
    hi: bytes | None
    min_rev: int
    filtered: bool
    prev_kv: bool

    def wants(self, ev: Event) -> bool: ...


L = TypeVar("L", bound=Listener)


class WatcherGroup(Generic[L]):
    __slots__ = ("_keys", "_ranges", "_size")

    def __init__(self) -> None:
        self._keys: dict[bytes, dict[L, None]] = {}
        self._ranges: RangeIndex[L] = RangeIndex()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, w: L) -> None:
        if w.single:
            self._keys.setdefault(w.key, {})[w] = None
        else:
            self._ranges.add(w.key, w.hi, w)
        self._size += 1

    def remove(self, w: L) -> None:
        if w.single:
            ws = self._keys[w.key]
            del ws[w]
            if not ws:
                del self._keys[w.key]
        else:
            self._ranges.remove(w.key, w.hi, w)
        self._size -= 1

    def match(self, events: list[Event]) -> dict[L, list[Event]]:
        """Per watcher, the events it must get, in order: at or above its `min_rev`, passing its
        filters, with prev_kv removed unless it asked for it.  Event objects are shared; the
        copies without prev_kv are made once per event, not once per watcher."""
        out: dict[L, list[Event]] = {}
        keys = self._keys
        ranges = self._ranges if self._ranges else None
        stripped: list[Event | None] | None = None
        for i, ev in enumerate(events):
            kv = ev.kv
            groups = ranges.stab(kv.key) if ranges is not None else []
            single = keys.get(kv.key)
            if single is not None:
                groups = [single, *groups]
            if not groups:
                continue
            rev = kv.mod_revision
            for group in groups:
                for w in group:
                    if rev < w.min_rev or (w.filtered and not w.wants(ev)):
                        continue
                    e = ev
                    if ev.prev_kv is not None and not w.prev_kv:
                        if stripped is None:
                            stripped = [None] * len(events)
                        e = stripped[i] or Event(ev.type, kv)
                        stripped[i] = e
                    lst = out.get(w)
                    if lst is None:
                        out[w] = [e]
                    else:
                        lst.append(e)
        return out
