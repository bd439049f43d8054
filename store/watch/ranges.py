"""Stabbing queries over key ranges: which ranges contain key k?

The boundaries of all distinct ranges cut the key space into elementary segments; every key
in a segment lies in the same ranges, so after a rebuild a lookup is one `bisect` plus the
precomputed list for that segment.  Rebuilds happen lazily, on the first lookup after the
set of distinct ranges changed; adding a member to an existing range costs nothing.  Watch
ranges are few and long-lived (typically one per resource prefix), and many watchers share
one range, so this trades rare O(ranges x segments) rebuilds for cheap per-event lookups.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Generic, TypeVar

T = TypeVar("T")

Bounds = tuple[bytes, bytes | None]
"""[lo, hi); hi None: unbounded."""


class RangeIndex(Generic[T]):
    __slots__ = ("_bounds", "_cover", "_dirty", "_groups")

    def __init__(self) -> None:
        # Members per distinct range; dicts as insertion-ordered sets (deterministic order).
        self._groups: dict[Bounds, dict[T, None]] = {}
        self._bounds: list[bytes] = []
        # _cover[j]: the groups containing segment j = [bounds[j-1], bounds[j]) (j = len: to infinity).
        self._cover: list[list[dict[T, None]]] = [[]]
        self._dirty = False

    def __bool__(self) -> bool:
        return bool(self._groups)

    def __len__(self) -> int:
        return sum(len(g) for g in self._groups.values())

    def add(self, lo: bytes, hi: bytes | None, item: T) -> None:
        group = self._groups.get((lo, hi))
        if group is None:
            group = self._groups[(lo, hi)] = {}
            self._dirty = True
        group[item] = None

    def remove(self, lo: bytes, hi: bytes | None, item: T) -> None:
        group = self._groups[(lo, hi)]
        del group[item]
        if not group:
            del self._groups[(lo, hi)]
            self._dirty = True

    def stab(self, key: bytes) -> list[dict[T, None]]:
        """The member sets of every range that contains `key` (do not modify them)."""
        if self._dirty:
            self._rebuild()
        return self._cover[bisect_right(self._bounds, key)]

    def _rebuild(self) -> None:
        points: set[bytes] = set()
        for lo, hi in self._groups:
            points.add(lo)
            if hi is not None:
                points.add(hi)
        bounds = sorted(points)
        pos = {b: i for i, b in enumerate(bounds)}
        cover: list[list[dict[T, None]]] = [[] for _ in range(len(bounds) + 1)]
        for (lo, hi), group in self._groups.items():
            last = pos[hi] if hi is not None else len(bounds)
            for j in range(pos[lo] + 1, last + 1):
                cover[j].append(group)
        self._bounds = bounds
        self._cover = cover
        self._dirty = False
