"""Status conditions set the way kube's helpers set them (SetCRDCondition,
SetAPIServiceCondition): one condition per type, and a condition whose status did not change
keeps its lastTransitionTime."""

from __future__ import annotations

from typing import Any


def merge_conditions(current: list[Any], wanted: list[dict[str, str]]) -> list[Any]:
    """`current` (its non-object entries dropped) with each wanted condition set."""
    out = [c for c in current if isinstance(c, dict)]
    for cond in wanted:
        found = next((c for c in out if c.get("type") == cond["type"]), None)
        if found is None:
            out.append(cond)
            continue
        if found.get("status") != cond["status"]:
            found["lastTransitionTime"] = cond["lastTransitionTime"]
        found["status"], found["reason"], found["message"] = cond["status"], cond["reason"], cond["message"]
    return out
