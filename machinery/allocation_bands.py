"""Where a random allocation begins in a range users may also pick from (KEP-3070 for
cluster IPs, KEP-3668 for node ports).

kube splits each range in two: a random pick comes from the upper band first, so the lower
band stays free for the addresses and ports users choose themselves.  The split is
`min(max(lower, size // step), upper)` — no split at all under `lower` — with constants
of its own for each kind of range; both allocators ask here so the rule lives once.
"""

from __future__ import annotations

from typing import NamedTuple


class BandRule(NamedTuple):
    """The constants of one kind of range (kube's calculateRangeOffset)."""

    lower: int
    upper: int
    step: int


SERVICE_IP_BANDS = BandRule(lower=16, upper=256, step=16)
NODE_PORT_BANDS = BandRule(lower=16, upper=128, step=32)


def dynamic_offset(size: int, rule: BandRule) -> int:
    """The offset where the dynamic (upper) band of a range of `size` values begins."""
    if size < rule.lower:
        return 0
    return min(max(rule.lower, size // rule.step), rule.upper)
