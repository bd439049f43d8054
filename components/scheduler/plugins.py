"""Filters and scores, each a pure function of the pod, one node and the cycle's pre-computed state.

Filters run in kube-scheduler's order and a node's verdict is the first failing filter's
`Status` (one filter may give several reasons, as NodeResourcesFit does).  `unresolvable` marks
kube's UnschedulableAndUnresolvable: evicting pods from that node cannot help, so preemption
skips it.  Reasons are kube-scheduler's own strings, since users grep events for them.

Scores are 0..100 per plugin after normalisation, summed with kube's default weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.scheduler.nodeinfo import HOSTNAME_LABEL, NodeInfo, PodInfo
from machinery.selectors import label_selector_matches, node_selector_term_matches
from machinery.taints import tolerates

Obj = dict[str, Any]
MAX_NODE_SCORE = 100

# kube-scheduler's reasons, word for word
ERR_UNSCHEDULABLE = "node(s) were unschedulable"
ERR_TAINT = "node(s) had untolerated taint {{{key}: {value}}}"
ERR_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
ERR_PORTS = "node(s) didn't have free ports for the requested pod ports"
ERR_TOO_MANY_PODS = "Too many pods"
ERR_INSUFFICIENT = "Insufficient {resource}"
ERR_SPREAD = "node(s) didn't match pod topology spread constraints"
ERR_SPREAD_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

WEIGHTS = {
    "NodeResourcesFit": 1,
    "NodeResourcesBalancedAllocation": 1,
    "NodeAffinity": 2,
    "PodTopologySpread": 2,
    "TaintToleration": 3,
}


@dataclass(frozen=True, slots=True)
class Status:
    """Why one node cannot take the pod."""

    plugin: str
    reasons: tuple[str, ...]
    unresolvable: bool = False


# -- selectors -----------------------------------------------------------------------------------


def node_matches_pod_selectors(pod: Obj, ni: NodeInfo) -> bool:
    """nodeSelector and required node affinity (terms are ORed)."""
    spec = pod.get("spec") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if ni.labels.get(k) != v:
            return False
    na = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        terms = required.get("nodeSelectorTerms") or ()
        if not any(node_selector_term_matches(t, ni.labels, ni.name) for t in terms):
            return False
    return True


# -- taints --------------------------------------------------------------------------------------


def _tolerations(pod: Obj) -> list[Obj]:
    return list((pod.get("spec") or {}).get("tolerations") or ())


# -- the cycle's state ---------------------------------------------------------------------------


@dataclass(slots=True)
class _SpreadConstraint:
    key: str
    max_skew: int
    selector: Mapping[str, Any] | None
    self_match: int
    counts: dict[str, int] = field(default_factory=dict)  # domain value -> matching pods
    min_count: int = 0


Filter = Callable[["CycleState", NodeInfo], "Status | None"]


@dataclass(slots=True)
class CycleState:
    """What the filters and scores of one pod share, computed once per cycle from every node.

    `filters` are the ones that can reject this pod somewhere: a pod without host ports, node
    selectors, spread constraints or affinity skips those filters on every node (a cycle runs
    them on hundreds of nodes, so a call that can only say yes is the cost that matters)."""

    pod: PodInfo
    tolerations: list[Obj]
    prefer_tolerations: list[Obj]  # the tolerations that count against PreferNoSchedule taints
    filters: tuple[Filter, ...]
    hard_spread: list[_SpreadConstraint]
    soft_spread: list[_SpreadConstraint]
    default_spread_owner: str  # spread pods of this owner over hostnames when no constraint is given
    forbidden_by_existing: set[tuple[str, str]]  # (topology key, value) barred by existing anti-affinity
    affinity_counts: list[dict[str, int]]  # per required affinity term: domain value -> matching pods
    anti_affinity_counts: list[dict[str, int]]
    affinity_matches_nobody: bool  # no pod anywhere matches any affinity term (and the pod matches itself)


def _term_namespaces(term: Mapping[str, Any], own_ns: str) -> set[str] | None:
    """None = every namespace (an empty namespaceSelector)."""
    names = term.get("namespaces") or ()
    if names:
        return set(names)
    ns_sel = term.get("namespaceSelector")
    if ns_sel is not None and not ns_sel.get("matchLabels") and not ns_sel.get("matchExpressions"):
        return None
    return {own_ns}


def _term_matches(term: Mapping[str, Any], owner_ns: str, other: PodInfo) -> bool:
    """Whether `other` is one of the pods a term (of a pod in `owner_ns`) selects."""
    namespaces = _term_namespaces(term, owner_ns)
    if namespaces is not None and other.namespace not in namespaces:
        return False
    return label_selector_matches(term.get("labelSelector"), other.labels)


def _live(pi: PodInfo) -> bool:
    return not (pi.pod.get("metadata") or {}).get("deletionTimestamp")


def pre_filter(pi: PodInfo, nodes: Sequence[NodeInfo]) -> CycleState:
    spec = pi.pod.get("spec") or {}
    hard: list[_SpreadConstraint] = []
    soft: list[_SpreadConstraint] = []
    for c in spec.get("topologySpreadConstraints") or ():
        sel = c.get("labelSelector")
        sc = _SpreadConstraint(
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

    forbidden: set[tuple[str, str]] = set()
    if any(ni.pods_with_anti_affinity for ni in nodes):
        for ni in nodes:
            if not ni.pods_with_anti_affinity:
                continue
            for other in ni.pods.values():
                for term in other.anti_affinity:
                    key = term.get("topologyKey") or ""
                    if key in ni.labels and _term_matches(term, other.namespace, pi):
                        forbidden.add((key, ni.labels[key]))

    aff_counts: list[dict[str, int]] = [{} for _ in pi.affinity]
    anti_counts: list[dict[str, int]] = [{} for _ in pi.anti_affinity]
    any_affinity_match = False
    if pi.affinity or pi.anti_affinity:
        for ni in nodes:
            for other in ni.pods.values():
                for i, term in enumerate(pi.affinity):
                    key = term.get("topologyKey") or ""
                    if _term_matches(term, pi.namespace, other):
                        any_affinity_match = True
                        if key in ni.labels:
                            aff_counts[i][ni.labels[key]] = aff_counts[i].get(ni.labels[key], 0) + 1
                for i, term in enumerate(pi.anti_affinity):
                    key = term.get("topologyKey") or ""
                    if key in ni.labels and _term_matches(term, pi.namespace, other):
                        anti_counts[i][ni.labels[key]] = anti_counts[i].get(ni.labels[key], 0) + 1
    matches_self = all(_term_matches(t, pi.namespace, pi) for t in pi.affinity)
    tolerations = _tolerations(pi.pod)
    skip: set[Filter] = set()
    if not _selects_nodes(pi.pod):
        skip.add(node_affinity)
    if not pi.ports:
        skip.add(node_ports)
    if not hard:
        skip.add(pod_topology_spread)
    if not (pi.affinity or pi.anti_affinity or forbidden):
        skip.add(inter_pod_affinity)
    return CycleState(
        pod=pi,
        tolerations=tolerations,
        prefer_tolerations=[t for t in tolerations if (t.get("effect") or "PreferNoSchedule") == "PreferNoSchedule"],
        filters=tuple(f for f in FILTERS if f not in skip),
        hard_spread=hard,
        soft_spread=soft,
        default_spread_owner=pi.owner_uid if not constraints else "",
        forbidden_by_existing=forbidden,
        affinity_counts=aff_counts,
        anti_affinity_counts=anti_counts,
        affinity_matches_nobody=bool(pi.affinity) and not any_affinity_match and matches_self,
    )


# -- filters -------------------------------------------------------------------------------------


def _selects_nodes(pod: Obj) -> bool:
    """Whether a nodeSelector or required node affinity can rule out a node."""
    spec = pod.get("spec") or {}
    if spec.get("nodeSelector"):
        return True
    na = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    return na.get("requiredDuringSchedulingIgnoredDuringExecution") is not None


def node_unschedulable(state: CycleState, ni: NodeInfo) -> Status | None:
    if not ni.unschedulable:
        return None
    taint = {"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}
    if any(tolerates(t, taint) for t in state.tolerations):
        return None
    return Status("NodeUnschedulable", (ERR_UNSCHEDULABLE,), unresolvable=True)


def taint_toleration(state: CycleState, ni: NodeInfo) -> Status | None:
    for taint in ni.hard_taints:
        if not any(tolerates(t, taint) for t in state.tolerations):
            reason = ERR_TAINT.format(key=taint.get("key", ""), value=taint.get("value", ""))
            return Status("TaintToleration", (reason,), unresolvable=True)
    return None


def node_affinity(state: CycleState, ni: NodeInfo) -> Status | None:
    if node_matches_pod_selectors(state.pod.pod, ni):
        return None
    return Status("NodeAffinity", (ERR_NODE_AFFINITY,), unresolvable=True)


def node_ports(state: CycleState, ni: NodeInfo) -> Status | None:
    for ip, proto, port in state.pod.ports:
        for uip, uproto, uport in ni.used_ports:
            if uport == port and uproto == proto and (ip == uip or "0.0.0.0" in (ip, uip)):
                return Status("NodePorts", (ERR_PORTS,))
    return None


def node_resources_fit(state: CycleState, ni: NodeInfo) -> Status | None:
    memo = ni.fit_memo
    key = state.pod.shape
    if memo is not None and memo[0] == key:
        return memo[1]  # type: ignore[no-any-return]
    status = _resources_fit(state, ni)
    ni.fit_memo = (key, status)
    return status


def _resources_fit(state: CycleState, ni: NodeInfo) -> Status | None:
    reasons = []
    if len(ni.pods) + 1 > ni.allowed_pods:
        reasons.append(ERR_TOO_MANY_PODS)
    want, used, alloc = state.pod.requests, ni.requested, ni.allocatable
    if want.milli_cpu > 0 and want.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        reasons.append(ERR_INSUFFICIENT.format(resource="cpu"))
    if want.memory > 0 and want.memory > alloc.memory - used.memory:
        reasons.append(ERR_INSUFFICIENT.format(resource="memory"))
    if want.ephemeral_storage > 0 and want.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage:
        reasons.append(ERR_INSUFFICIENT.format(resource="ephemeral-storage"))
    return Status("NodeResourcesFit", tuple(reasons)) if reasons else None


def pod_topology_spread(state: CycleState, ni: NodeInfo) -> Status | None:
    for sc in state.hard_spread:
        value = ni.labels.get(sc.key)
        if value is None:
            return Status("PodTopologySpread", (ERR_SPREAD_MISSING_LABEL,), unresolvable=True)
        if sc.counts.get(value, 0) + sc.self_match - sc.min_count > sc.max_skew:
            return Status("PodTopologySpread", (ERR_SPREAD,))
    return None


def inter_pod_affinity(state: CycleState, ni: NodeInfo) -> Status | None:
    pi = state.pod
    for i, term in enumerate(pi.affinity):
        key = term.get("topologyKey") or ""
        value = ni.labels.get(key)
        if value is None:
            return Status("InterPodAffinity", (ERR_AFFINITY,), unresolvable=True)
        if state.affinity_counts[i].get(value, 0) == 0 and not state.affinity_matches_nobody:
            return Status("InterPodAffinity", (ERR_AFFINITY,), unresolvable=True)
    for i, term in enumerate(pi.anti_affinity):
        value = ni.labels.get(term.get("topologyKey") or "")
        if value is not None and state.anti_affinity_counts[i].get(value, 0) > 0:
            return Status("InterPodAffinity", (ERR_ANTI_AFFINITY,))
    for key, value in state.forbidden_by_existing:
        if ni.labels.get(key) == value:
            return Status("InterPodAffinity", (ERR_EXISTING_ANTI_AFFINITY,))
    return None


FILTERS = (
    node_unschedulable,
    taint_toleration,
    node_affinity,
    node_ports,
    node_resources_fit,
    pod_topology_spread,
    inter_pod_affinity,
)


def run_filters(state: CycleState, ni: NodeInfo) -> Status | None:
    """The first failing filter's status, or None when the node can take the pod."""
    for f in state.filters:
        status = f(state, ni)
        if status is not None:
            return status
    return None


# -- scores (raw; `normalize` maps them to 0..100) ----------------------------------------------


def least_allocated(state: CycleState, ni: NodeInfo) -> int:
    cpu, mem = ni.non_zero_requested
    cpu += state.pod.non_zero[0]
    mem += state.pod.non_zero[1]
    total = 0
    for req, cap in ((cpu, ni.allocatable.milli_cpu), (mem, ni.allocatable.memory)):
        if cap > 0 and req <= cap:
            total += (cap - req) * MAX_NODE_SCORE // cap
    return total // 2


def balanced_allocation(state: CycleState, ni: NodeInfo) -> int:
    cpu, mem = ni.non_zero_requested
    cpu += state.pod.non_zero[0]
    mem += state.pod.non_zero[1]
    fc = min(1.0, cpu / ni.allocatable.milli_cpu) if ni.allocatable.milli_cpu > 0 else 1.0
    fm = min(1.0, mem / ni.allocatable.memory) if ni.allocatable.memory > 0 else 1.0
    std = abs(fc - fm) / 2
    return int((1 - std) * MAX_NODE_SCORE)


def resource_scores(state: CycleState, ni: NodeInfo) -> int:
    """least_allocated and balanced_allocation, weighted and summed, in one pass over the
    node's numbers (every feasible node of every cycle comes through here; see `score_memo`)."""
    memo = ni.score_memo
    if memo is not None and memo[0] == state.pod.non_zero:
        return memo[1]
    score = _resource_scores(state, ni)
    ni.score_memo = (state.pod.non_zero, score)
    return score


def _resource_scores(state: CycleState, ni: NodeInfo) -> int:
    cpu, mem = ni.non_zero_requested
    cpu += state.pod.non_zero[0]
    mem += state.pod.non_zero[1]
    cap_cpu, cap_mem = ni.allocatable.milli_cpu, ni.allocatable.memory
    least = 0
    if cap_cpu > 0 and cpu <= cap_cpu:
        least += (cap_cpu - cpu) * MAX_NODE_SCORE // cap_cpu
    if cap_mem > 0 and mem <= cap_mem:
        least += (cap_mem - mem) * MAX_NODE_SCORE // cap_mem
    fc = min(1.0, cpu / cap_cpu) if cap_cpu > 0 else 1.0
    fm = min(1.0, mem / cap_mem) if cap_mem > 0 else 1.0
    balanced = int((1 - abs(fc - fm) / 2) * MAX_NODE_SCORE)
    return WEIGHTS["NodeResourcesFit"] * (least // 2) + WEIGHTS["NodeResourcesBalancedAllocation"] * balanced


def preferred_node_affinity(state: CycleState, ni: NodeInfo) -> int:
    na = ((state.pod.pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    total = 0
    for pref in na.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        w = int(pref.get("weight") or 0)
        if w and node_selector_term_matches(pref.get("preference") or {}, ni.labels, ni.name):
            total += w
    return total


def intolerable_prefer_no_schedule(state: CycleState, ni: NodeInfo) -> int:
    tolerations = state.prefer_tolerations
    return sum(1 for taint in ni.soft_taints if not any(tolerates(t, taint) for t in tolerations))


def spread_count(state: CycleState, ni: NodeInfo) -> int:
    """Pods this pod should spread away from in the node's domains (fewer is better)."""
    if state.default_spread_owner:
        return ni.owners.get(state.default_spread_owner, 0)
    total = 0.0
    for sc in state.soft_spread:
        value = ni.labels.get(sc.key)
        if value is not None:
            # kube weighs a constraint by log(domains + 2) so that finer topologies count more
            total += (sc.counts.get(value, 0) + sc.max_skew - 1) * math.log(len(sc.counts) + 2)
    return round(total)


def _normalize(raw: list[int], reverse: bool) -> list[int]:
    top = max(raw, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0] * len(raw)
    return [MAX_NODE_SCORE - r * MAX_NODE_SCORE // top if reverse else r * MAX_NODE_SCORE // top for r in raw]


def _normalize_spread(raw: list[int]) -> list[int]:
    if not raw:
        return []
    lo, hi = min(raw), max(raw)
    if hi == 0:
        return [MAX_NODE_SCORE] * len(raw)
    return [MAX_NODE_SCORE * (hi + lo - r) // hi for r in raw]


def score_nodes(state: CycleState, nodes: Sequence[NodeInfo]) -> list[int]:
    """The weighted total score of each node, in order."""
    totals = [resource_scores(state, ni) for ni in nodes]
    if _has_preferred_node_affinity(state.pod.pod):
        for i, s in enumerate(_normalize([preferred_node_affinity(state, ni) for ni in nodes], reverse=False)):
            totals[i] += WEIGHTS["NodeAffinity"] * s
    if any(ni.soft_taints for ni in nodes):
        taint_raw = [intolerable_prefer_no_schedule(state, ni) for ni in nodes]
        for i, s in enumerate(_normalize(taint_raw, reverse=True)):
            totals[i] += WEIGHTS["TaintToleration"] * s
    else:  # nothing to tolerate anywhere: every node gets the full score
        totals = [t + WEIGHTS["TaintToleration"] * MAX_NODE_SCORE for t in totals]
    if state.default_spread_owner or state.soft_spread:
        for i, s in enumerate(_normalize_spread([spread_count(state, ni) for ni in nodes])):
            totals[i] += WEIGHTS["PodTopologySpread"] * s
    return totals


def _has_preferred_node_affinity(pod: Obj) -> bool:
    na = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return bool(na.get("preferredDuringSchedulingIgnoredDuringExecution"))


def all_reasons(statuses: Iterable[Status]) -> list[str]:
    return [r for s in statuses for r in s.reasons]
