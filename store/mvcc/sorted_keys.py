"""A sorted set of byte strings, stored as a list of sorted chunks.

Why not one sorted list: inserting into a Python list moves every element after the slot,
which is a few hundred microseconds at a million keys; with chunks of about `LOAD` keys an
insert moves at most one chunk, and a scan still walks contiguous lists (the layout of
sortedcontainers.SortedList, which is not a dependency of this project).

Invariants: `_maxes[i] == _chunks[i][-1]`; chunks are non-empty, sorted, and every key of
chunk i sorts before every key of chunk i + 1; no key appears twice.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator

LOAD = 512


class SortedKeys:
    __slots__ = ("_chunks", "_len", "_maxes")

    def __init__(self, keys: list[bytes] | None = None) -> None:
        self._chunks: list[list[bytes]] = []
        self._maxes: list[bytes] = []
        self._len = 0
        if keys:
            self._load(sorted(keys))

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            yield from chunk

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, bytes) or not self._maxes:
            return False
        i = bisect_left(self._maxes, key)
        if i == len(self._maxes):
            return False
        chunk = self._chunks[i]
        j = bisect_left(chunk, key)
        return j < len(chunk) and chunk[j] == key

    def add(self, key: bytes) -> None:
        """Insert a key that is not present yet (the caller knows: it keeps a dict beside us)."""
        maxes = self._maxes
        self._len += 1
        if not maxes:
            self._chunks.append([key])
            maxes.append(key)
            return
        i = bisect_left(maxes, key)
        if i == len(maxes):  # beyond the last key: the common case of growing names
            i -= 1
            chunk = self._chunks[i]
            chunk.append(key)
            maxes[i] = key
        else:
            chunk = self._chunks[i]
            insort(chunk, key)
        if len(chunk) > 2 * LOAD:
            self._chunks[i : i + 1] = [chunk[:LOAD], chunk[LOAD:]]
            maxes[i : i + 1] = [chunk[LOAD - 1], chunk[-1]]

    def remove(self, key: bytes) -> None:
        """Remove a key that is present."""
        maxes = self._maxes
        i = bisect_left(maxes, key)
        chunk = self._chunks[i]
        j = bisect_left(chunk, key)
        if j == len(chunk) or chunk[j] != key:
            raise KeyError(key)
        del chunk[j]
        self._len -= 1
        if not chunk:
            del self._chunks[i]
            del maxes[i]
        elif j == len(chunk):
            maxes[i] = chunk[-1]

    def remove_many(self, keys: set[bytes]) -> None:
        """Remove many present keys at once (compaction): one pass when the batch is large."""
        if len(keys) * 8 < self._len:
            for k in sorted(keys):
                self.remove(k)
            return
        self._load([k for k in self if k not in keys])

    def irange(self, lo: bytes, hi: bytes | None) -> Iterator[bytes]:
        """Keys k with lo <= k < hi (hi None: no upper bound), ascending."""
        maxes = self._maxes
        i = bisect_left(maxes, lo)
        if i == len(maxes):
            return
        chunks = self._chunks
        chunk = chunks[i]
        j = bisect_left(chunk, lo)
        while True:
            if hi is not None and maxes[i] >= hi:
                yield from chunk[j : bisect_left(chunk, hi, j)]
                return
            yield from chunk[j:] if j else chunk
            i += 1
            if i == len(chunks):
                return
            chunk = chunks[i]
            j = 0

    def _load(self, keys: list[bytes]) -> None:
        self._chunks = [keys[i : i + LOAD] for i in range(0, len(keys), LOAD)]
        self._maxes = [c[-1] for c in self._chunks]
        self._len = len(keys)
