"""What the cache holds and hands out: entries (decoded objects), cache events, watch events.

Objects are decoded once, when the storage event arrives, and then shared by every list result
and every watcher: nothing downstream may mutate them.  A `WatchEvent` is shared too, so that
its wire form is made once per encoding for all the watchers that send it (`encoded`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from machinery.objects import Obj

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]


@dataclass(eq=False, slots=True)
class WatchEvent:
    """One event of a watch stream: `{"type": ..., "object": ...}` once encoded."""

    type: EventType
    object: Obj
    _encoded: dict[str, bytes] = field(default_factory=dict, repr=False)

    def encoded(self, key: str, make: Callable[[WatchEvent], bytes]) -> bytes:
        """The bytes `make` gives for this event, computed once per `key` (one key per encoding)."""
        data = self._encoded.get(key)
        if data is None:
            data = make(self)
            self._encoded[key] = data
        return data


@dataclass(eq=False, slots=True)
class Entry:
    """One object as the cache holds it, with what filters and indexes read precomputed."""

    key: str
    object: Obj
    labels: Mapping[str, str]
    fields: Mapping[str, str]
    namespace: str
    name: str
    _added: WatchEvent | None = field(default=None, repr=False)

    def added(self) -> WatchEvent:
        """The shared ADDED event for this object (initial events, and filter transitions)."""
        if self._added is None:
            self._added = WatchEvent("ADDED", self.object)
        return self._added


def make_entry(key: str, obj: Obj, fields_of: Callable[[Obj], Mapping[str, str]]) -> Entry:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return Entry(
        key=key,
        object=obj,
        labels=labels if isinstance(labels, dict) else {},
        fields=fields_of(obj),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
    )


def at_revision(entry: Entry, revision: int) -> Entry:
    """The same object with resourceVersion = `revision` (a delete shows the last state at its revision)."""
    obj = dict(entry.object)
    obj["metadata"] = {**(obj.get("metadata") or {}), "resourceVersion": str(revision)}
    return Entry(entry.key, obj, entry.labels, entry.fields, entry.namespace, entry.name)


@dataclass(eq=False, slots=True)
class CacheEvent:
    """One change as the window keeps it: the object after (`entry`) and before (`prev`) it.

    For DELETED, `entry` is the last state with the delete's revision and `prev` the state before.
    The three ways a watcher may see it are built lazily and shared between watchers."""

    type: Literal["ADDED", "MODIFIED", "DELETED"]
    entry: Entry
    prev: Entry | None
    revision: int
    _as_is: WatchEvent | None = field(default=None, repr=False)
    _as_deleted: WatchEvent | None = field(default=None, repr=False)

    def as_is(self) -> WatchEvent:
        if self._as_is is None:
            self._as_is = self.entry.added() if self.type == "ADDED" else WatchEvent(self.type, self.entry.object)
        return self._as_is

    def as_added(self) -> WatchEvent:
        """For a watcher the object starts to match: ADDED with the new state."""
        return self.entry.added()

    def as_deleted(self) -> WatchEvent:
        """For a watcher the object stops matching: DELETED with the old state at this revision."""
        if self.type == "DELETED":
            return self.as_is()
        if self._as_deleted is None:
            assert self.prev is not None
            self._as_deleted = WatchEvent("DELETED", at_revision(self.prev, self.revision).object)
        return self._as_deleted
