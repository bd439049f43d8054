"""Raw scores to 0..100: kube's helper.DefaultNormalizeScore, which NodeAffinity and
TaintToleration share (the highest raw score maps to 100, or to 0 when `reverse`)."""

from __future__ import annotations

from components.scheduler.plugins.cycle import MAX_NODE_SCORE


def default_normalize(raw: list[int], reverse: bool) -> list[int]:
    top = max(raw, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0] * len(raw)
    return [MAX_NODE_SCORE - r * MAX_NODE_SCORE // top if reverse else r * MAX_NODE_SCORE // top for r in raw]
