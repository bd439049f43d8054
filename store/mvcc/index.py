"""The key index: every key with retained history, by key (dict) and in key order (SortedKeys).

Like etcd's treeIndex it also holds deleted keys until compaction removes their tombstones,
so a range at an old revision can find them.  Scans must not change the index while they
run: callers materialize the keys they will write before writing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from store.mvcc.key_index import KeyIndex
from store.mvcc.sorted_keys import SortedKeys


class Index:
    __slots__ = ("_keys", "_map")

    def __init__(self) -> None:
        self._map: dict[bytes, KeyIndex] = {}
        self._keys = SortedKeys()

    def __len__(self) -> int:
        return len(self._map)

    def __iter__(self) -> Iterator[KeyIndex]:
        """Every KeyIndex in key order."""
        m = self._map
        for k in self._keys:
            yield m[k]

    def get(self, key: bytes) -> KeyIndex | None:
        return self._map.get(key)

    def create(self, key: bytes) -> KeyIndex:
        """A new, empty KeyIndex for a key that has none."""
        ki = KeyIndex(key)
        self._map[key] = ki
        self._keys.add(key)
        return ki

    def range(self, lo: bytes, hi: bytes | None) -> Iterator[KeyIndex]:
        """KeyIndexes with lo <= key < hi (hi None: unbounded), in key order."""
        m = self._map
        for k in self._keys.irange(lo, hi):
            yield m[k]

    def compact(self, at_rev: int, keys: Iterable[bytes]) -> None:
        """Compact the given keys (those changed since the previous compaction); keys left
        empty leave the index."""
        gone: set[bytes] = set()
        m = self._map
        for k in keys:
            ki = m.get(k)
            if ki is not None and ki.compact(at_rev):
                gone.add(k)
        if gone:
            for k in gone:
                del m[k]
            self._keys.remove_many(gone)
