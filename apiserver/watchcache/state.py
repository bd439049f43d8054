"""The current objects, by key, kept in key order (lists are served sorted by key)."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator

from apiserver.watchcache.events import Entry


class State:
    def __init__(self) -> None:
        self._by_key: dict[str, Entry] = {}
        self._keys: list[str] = []  # sorted

    def __len__(self) -> int:
        return len(self._by_key)

    def get(self, key: str) -> Entry | None:
        return self._by_key.get(key)

    def replace(self, entries: list[Entry]) -> None:
        self._by_key = {e.key: e for e in entries}
        self._keys = sorted(self._by_key)

    def put(self, entry: Entry) -> Entry | None:
        old = self._by_key.get(entry.key)
        self._by_key[entry.key] = entry
        if old is None:
            bisect.insort(self._keys, entry.key)
        return old

    def delete(self, key: str) -> Entry | None:
        old = self._by_key.pop(key, None)
        if old is not None:
            i = bisect.bisect_left(self._keys, key)
            del self._keys[i]
        return old

    def scan(self, prefix: str, start: str = "") -> Iterator[Entry]:
        """Entries whose key starts with `prefix`, from `start` (inclusive) on, in key order."""
        i = bisect.bisect_left(self._keys, max(prefix, start))
        keys = self._keys
        while i < len(keys) and keys[i].startswith(prefix):
            yield self._by_key[keys[i]]
            i += 1

    def scan_at(self, overlay: dict[str, Entry | None], prefix: str, start: str = "") -> Iterator[Entry]:
        """Like `scan`, but as the state was before the changes in `overlay` (see History.overlay)."""
        if not overlay:
            yield from self.scan(prefix, start)
            return
        low = max(prefix, start)
        changed = sorted(k for k in overlay if k >= low and k.startswith(prefix))
        current = (e.key for e in self.scan(prefix, start))
        last = None
        for key in heapq.merge(current, changed):
            if key == last:
                continue
            last = key
            entry = overlay[key] if key in overlay else self._by_key[key]
            if entry is not None:
                yield entry
