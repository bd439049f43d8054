"""The scheduler's goal: >= 300 pods/s on 1,000 nodes, checked on every case with 1,000 nodes.

kube-scheduler's own CI floor (scheduler_perf) is 680 pods/s on 5,000 nodes, on machines with
far more cores; 300 on 1,000 is what a single Python process should reach on a small machine.
"""

from __future__ import annotations

from typing import Any

from bench.store.targets import Target

GOAL_PODS_PER_S = 300.0
GOAL_NODES = 1000


def applies(case: dict[str, Any]) -> bool:
    return int(case["nodes"]) == GOAL_NODES


def evaluate(cases: dict[str, dict[str, Any]]) -> list[Target]:
    out: list[Target] = []
    for r in cases.values():
        if not applies(r):
            continue
        value = r.get("pods_per_s")
        met = None if value is None else bool(r.get("complete") and value >= GOAL_PODS_PER_S)
        name = f"pods/s, {r['pods']:,} pending pods on {r['nodes']:,} nodes (every pod bound)"
        out.append(Target(name, f">= {GOAL_PODS_PER_S:.0f}/s", value, met, "/s"))
    if not out:
        out.append(Target(f"pods/s on {GOAL_NODES:,} nodes", f">= {GOAL_PODS_PER_S:.0f}/s", None, None, "/s"))
    return out
