"""Which links between members a network fault touches: what both fault meshes (the proxies'
ProxyMesh and the kernel's KernelMesh) mean by a member, a link, a partition and a bridge.

A link (i, j) carries i's messages to j; every ordered pair of distinct members is one."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

Link = tuple[int, int]
Target = int | Link


class LinkSelection:
    """Mixed into a mesh that sets `ids`, the members it covers."""

    ids: list[int]

    def _check(self, *members: int) -> None:
        for m in members:
            if m not in self.ids:
                raise ValueError(f"no member {m} in this mesh (members: {self.ids})")

    def links_of(self, target: Target) -> list[Link]:
        """A member's links both ways, or one link (what a fault on `target` touches)."""
        return self._select(target)

    def _select(self, target: Target) -> list[Link]:
        """A member's links both ways, or one link."""
        if isinstance(target, int):
            self._check(target)
            return [link for link in itertools.permutations(self.ids, 2) if target in link]
        src, dst = target
        self._check(src, dst)
        if src == dst:
            raise ValueError(f"no link from member {src} to itself")
        return [(src, dst)]

    def _between(self, a: Sequence[int], b: Sequence[int]) -> list[Link]:
        """Both directions of every link from a member of `a` to one of `b`."""
        self._check(*a, *b)
        return [link for x, y in itertools.product(a, b) if x != y for link in ((x, y), (y, x))]

    def _partition(self, groups: list[list[int]]) -> list[Link]:
        """The links that cross groups (a member in no group is alone)."""
        listed = [m for g in groups for m in g]
        if len(listed) != len(set(listed)):
            raise ValueError(f"a member is in two groups: {groups}")
        self._check(*listed)
        group_of = {m: i for i, g in enumerate(groups) for m in g}
        return [(s, d) for s, d in itertools.permutations(self.ids, 2) if group_of.get(s, -s) != group_of.get(d, -d)]

    def _bridge(self, a: int | Sequence[int], bridge_member: int, b: int | Sequence[int]) -> list[Link]:
        """The links between sides a and b, which both keep talking to `bridge_member`."""
        side_a = [a] if isinstance(a, int) else list(a)
        side_b = [b] if isinstance(b, int) else list(b)
        if bridge_member in side_a or bridge_member in side_b:
            raise ValueError("the bridge member belongs to neither side")
        return self._between(side_a, side_b)
