"""One scheduling cycle, pure: filter the nodes, score the feasible ones, pick the best.

As kube-scheduler, a large cluster is not searched exhaustively: the search starts where the
last one stopped and ends once `feasible_nodes_to_find` nodes passed the filters (all nodes
below 100, otherwise 50% - nodes/125 with floors of 5% and 100 nodes).  Ties between the best
scores are broken at random (the caller's `random.Random`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from components.scheduler.nodeinfo import NodeInfo, PodInfo
from components.scheduler.plugins import pre_filter, run_filters, score_nodes
from components.scheduler.plugins.cycle import CycleState, Status
from components.scheduler.plugins.interpodaffinity import NamespaceLabels, no_namespaces

NO_NODE_AVAILABLE = "0/{n} nodes are available"
MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENT = 5


@dataclass(slots=True)
class Diagnosis:
    node_to_status: dict[str, Status] = field(default_factory=dict)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""


@dataclass(slots=True)
class FitError(Exception):
    """No node can take the pod; `message()` is kube-scheduler's FitError text."""

    pod: PodInfo
    num_all_nodes: int
    diagnosis: Diagnosis

    def __str__(self) -> str:
        return self.message()

    def message(self) -> str:
        msg = NO_NODE_AVAILABLE.format(n=self.num_all_nodes) + ":"
        if self.diagnosis.pre_filter_msg:
            msg += f" {self.diagnosis.pre_filter_msg}."
        else:
            counts = Counter(r for s in self.diagnosis.node_to_status.values() for r in s.reasons)
            # kube sorts the "count reason" strings themselves (so "10 x" sorts before "2 y")
            histogram = sorted(f"{n} {reason}" for reason, n in counts.items())
            if histogram:
                msg += f" {', '.join(histogram)}."
        if self.diagnosis.post_filter_msg:
            msg += f" {self.diagnosis.post_filter_msg}"
        return msg

    def unschedulable_plugins(self) -> set[str]:
        return {s.plugin for s in self.diagnosis.node_to_status.values()}


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    node: str
    evaluated: int
    feasible: int


def feasible_nodes_to_find(num_all: int, percentage: int = 0) -> int:
    if num_all < MIN_FEASIBLE_NODES:
        return num_all
    pct = percentage or max(MIN_FEASIBLE_PERCENT, 50 - num_all // 125)
    return max(MIN_FEASIBLE_NODES, num_all * pct // 100)


def with_nominated(ni: NodeInfo, pi: PodInfo, nominated: Mapping[str, Sequence[PodInfo]]) -> NodeInfo:
    """The node as the pod must see it: with the pods nominated to it that outrank or equal it
    (their room is reserved while their victims terminate)."""
    others = [p for p in nominated.get(ni.name, ()) if p.key != pi.key and p.priority >= pi.priority]
    if not others:
        return ni
    clone = ni.clone()
    for p in others:
        clone.add_pod(p)
    return clone


class Algorithm:
    """Filters and scores over a list of nodes; keeps where the last search stopped."""

    def __init__(
        self,
        rng: random.Random | None = None,
        percentage_of_nodes_to_score: int = 0,
        namespace_labels: NamespaceLabels = no_namespaces,
    ) -> None:
        self.rng = rng or random.Random()
        self.namespace_labels = namespace_labels
        self.percentage = percentage_of_nodes_to_score
        self.next_start = 0

    def filter_node(
        self, state: CycleState, ni: NodeInfo, nominated: Mapping[str, Sequence[PodInfo]] | None = None
    ) -> Status | None:
        return run_filters(state, with_nominated(ni, state.pod, nominated) if nominated else ni)

    def schedule(
        self,
        pi: PodInfo,
        nodes: Sequence[NodeInfo],
        nominated: Mapping[str, Sequence[PodInfo]] | None = None,
        nominated_node: str = "",
    ) -> ScheduleResult:
        """The node for the pod, or FitError with every rejected node's reason."""
        if not nodes:
            raise FitError(pi, 0, Diagnosis(pre_filter_msg="no nodes available to schedule pods"))
        state = pre_filter(pi, nodes, self.namespace_labels)
        if nominated_node:
            # a preemptor tries the node it freed first
            for ni in nodes:
                if ni.name == nominated_node and self.filter_node(state, ni, nominated) is None:
                    return ScheduleResult(ni.name, 1, 1)
        want = feasible_nodes_to_find(len(nodes), self.percentage)
        feasible: list[NodeInfo] = []
        diagnosis = Diagnosis()
        n = len(nodes)
        start = self.next_start % n
        processed = 0
        for i in range(n):
            ni = nodes[(start + i) % n]
            processed += 1
            status = run_filters(state, with_nominated(ni, pi, nominated) if nominated else ni)
            if status is None:
                feasible.append(ni)
                if len(feasible) >= want:
                    break
            else:
                diagnosis.node_to_status[ni.name] = status
        self.next_start = (start + processed) % n
        if not feasible:
            raise FitError(pi, n, diagnosis)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, processed, 1)
        scores = score_nodes(state, feasible)
        return ScheduleResult(self._select(feasible, scores), processed, len(feasible))

    def _select(self, nodes: Sequence[NodeInfo], scores: Sequence[int]) -> str:
        best, chosen, ties = -1, "", 0
        for ni, s in zip(nodes, scores, strict=True):
            if s > best:
                best, chosen, ties = s, ni.name, 1
            elif s == best:
                ties += 1
                if self.rng.randrange(ties) == 0:  # reservoir sampling: each tie equally likely
                    chosen = ni.name
        return chosen
