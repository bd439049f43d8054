"""Watchers indexed by what they require, so an event touches only the watchers it concerns.

A watcher goes in one bucket: the exact `metadata.name` or `spec.nodeName` its field selector
requires, else its namespace, else the unindexed set that sees every event.  An event looks in
the buckets of its object and of the previous object (a pod moving off a node must reach the
old node's watchers as DELETED).
"""

from __future__ import annotations

from collections.abc import Iterator

from apiserver.watchcache.events import CacheEvent
from apiserver.watchcache.filter import entry_index_keys
from apiserver.watchcache.watcher import CacheWatcher


class WatcherIndex:
    def __init__(self) -> None:
        self._buckets: dict[tuple[str, str], dict[int, CacheWatcher]] = {}
        self._unindexed: dict[int, CacheWatcher] = {}
        self._where: dict[int, tuple[str, str] | None] = {}

    def __len__(self) -> int:
        return len(self._where)

    def add(self, watcher: CacheWatcher) -> None:
        key = watcher.filter.index_key()
        self._where[id(watcher)] = key
        bucket = self._unindexed if key is None else self._buckets.setdefault(key, {})
        bucket[id(watcher)] = watcher

    def remove(self, watcher: CacheWatcher) -> None:
        if id(watcher) not in self._where:
            return
        key = self._where.pop(id(watcher))
        if key is None:
            self._unindexed.pop(id(watcher), None)
            return
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.pop(id(watcher), None)
            if not bucket:
                del self._buckets[key]

    def all(self) -> list[CacheWatcher]:
        found = list(self._unindexed.values())
        for bucket in self._buckets.values():
            found.extend(bucket.values())
        return found

    def concerned(self, event: CacheEvent) -> Iterator[CacheWatcher]:
        """Every watcher that may see `event` (each once); a snapshot, so callers may remove watchers."""
        keys = set(entry_index_keys(event.entry))
        if event.prev is not None:
            keys.update(entry_index_keys(event.prev))
        found = list(self._unindexed.values())
        for key in keys:
            bucket = self._buckets.get(key)
            if bucket:
                found.extend(bucket.values())
        return iter(found)
