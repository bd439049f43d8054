"""PodTopologySpread: keep the pods a constraint selects evenly spread over the values of its
topology key (zones, hostnames).

A DoNotSchedule constraint is a filter: placing the pod in a domain may not make that domain's
count exceed the smallest one's by more than `maxSkew`, and a node without the key is refused.
ScheduleAnyway constraints are a score (fewer matching pods in the node's domain is better).  A
pod with no constraints at all is spread by its controlling owner over hostnames (kube's system
default spreading).  Only nodes the pod may go to form domains (nodeAffinityPolicy Honor, the
default), and only live pods of the pod's namespace are counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.scheduler.nodeinfo import HOSTNAME_LABEL, NodeInfo, PodInfo
from components.scheduler.plugins.cycle import MAX_NODE_SCORE, CycleState, Status
from components.scheduler.plugins.nodeaffinity import node_matches_pod_selectors
from machinery.selectors import label_selector_matches

NAME = "PodTopologySpread"
ERR_SPREAD = "node(s) didn't match pod topology spread constraints"
ERR_SPREAD_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"


@dataclass(slots=True)
class SpreadConstraint:
    key: str
    max_skew: int
    selector: Mapping[str, Any] | None
    self_match: int
    counts: dict[str, int] = field(default_factory=dict)  # domain value -> matching pods
    min_count: int = 0


@dataclass(frozen=True, slots=True)
class SpreadState:
    """The pod's constraints with the counts of every domain, from PreFilter."""

    hard: list[SpreadConstraint]  # DoNotSchedule: the filter
    soft: list[SpreadConstraint]  # ScheduleAnyway: the score
    default_owner: str  # spread pods of this owner over hostnames when no constraint is given


def _live(pi: PodInfo) -> bool:
    return not (pi.pod.get("metadata") or {}).get("deletionTimestamp")


def pre_filter(pi: PodInfo, nodes: Sequence[NodeInfo]) -> SpreadState:
    spec = pi.pod.get("spec") or {}
    hard: list[SpreadConstraint] = []
    soft: list[SpreadConstraint] = []
    for c in spec.get("topologySpreadConstraints") or ():
        sel = c.get("labelSelector")
        sc = SpreadConstraint(
            key=c.get("topologyKey") or HOSTNAME_LABEL,
            max_skew=int(c.get("maxSkew") or 1),
            selector=sel,
            self_match=1 if label_selector_matches(sel, pi.labels) else 0,
        )
        (hard if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule" else soft).append(sc)
    constraints = hard + soft
    if constraints:
        for ni in nodes:
            if not node_matches_pod_selectors(pi.pod, ni):
                continue  # nodeAffinityPolicy Honor: only nodes the pod may go to form domains
            for sc in constraints:
                value = ni.labels.get(sc.key)
                if value is None:
                    continue
                n = sum(
                    1
                    for other in ni.pods.values()
                    if other.namespace == pi.namespace
                    and _live(other)
                    and label_selector_matches(sc.selector, other.labels)
                )
                sc.counts[value] = sc.counts.get(value, 0) + n
        for sc in constraints:
            sc.min_count = min(sc.counts.values()) if sc.counts else 0
    return SpreadState(hard, soft, pi.owner_uid if not constraints else "")


def pod_topology_spread(state: CycleState, ni: NodeInfo) -> Status | None:
    for sc in state.spread.hard:
        value = ni.labels.get(sc.key)
        if value is None:
            return Status(NAME, (ERR_SPREAD_MISSING_LABEL,), unresolvable=True)
        if sc.counts.get(value, 0) + sc.self_match - sc.min_count > sc.max_skew:
            return Status(NAME, (ERR_SPREAD,))
    return None


def ranks_nodes(state: CycleState) -> bool:
    """Whether the score can tell nodes apart for this pod (it has a soft constraint or an owner)."""
    return bool(state.spread.default_owner or state.spread.soft)


def spread_count(state: CycleState, ni: NodeInfo) -> int:
    """The raw score: pods this pod should spread away from in the node's domains (fewer is better)."""
    if state.spread.default_owner:
        return ni.owners.get(state.spread.default_owner, 0)
    total = 0.0
    for sc in state.spread.soft:
        value = ni.labels.get(sc.key)
        if value is not None:
            # kube weighs a constraint by log(domains + 2) so that finer topologies count more
            total += (sc.counts.get(value, 0) + sc.max_skew - 1) * math.log(len(sc.counts) + 2)
    return round(total)


def normalize(raw: list[int]) -> list[int]:
    """Raw counts to 0..100, fewest best, as kube's NormalizeScore for this plugin."""
    if not raw:
        return []
    lo, hi = min(raw), max(raw)
    if hi == 0:
        return [MAX_NODE_SCORE] * len(raw)
    return [MAX_NODE_SCORE * (hi + lo - r) // hi for r in raw]
