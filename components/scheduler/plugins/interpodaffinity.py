"""InterPodAffinity: the pod's required pod affinity and anti-affinity, and the required
anti-affinity of the pods already placed.

A term selects pods (its `labelSelector`, in its namespaces: listed, or selected by their
labels, which the scheduler's namespaces informer supplies) and names a topology key; the pod
needs a node whose domain holds a pod every affinity term selects (unless no pod anywhere
matches and the pod matches its own terms: the first of a group may go anywhere), and no pod
any anti-affinity term selects.  A placed pod's anti-affinity term that selects this pod bars
that pod's whole domain.  Everything is counted once per cycle in `pre_filter`; the filter only
looks the node's domain up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.scheduler.nodeinfo import NodeInfo, PodInfo
from components.scheduler.plugins.cycle import CycleState, Status
from machinery.selectors import label_selector_matches

NAME = "InterPodAffinity"
ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"


@dataclass(frozen=True, slots=True)
class AffinityState:
    """What PreFilter counted over every node."""

    forbidden_by_existing: set[tuple[str, str]]  # (topology key, value) barred by existing anti-affinity
    affinity_counts: list[dict[str, int]]  # per required affinity term: domain value -> matching pods
    anti_affinity_counts: list[dict[str, int]]
    affinity_matches_nobody: bool  # no pod anywhere matches any affinity term (and the pod matches itself)

    def can_reject(self, pi: PodInfo) -> bool:
        return bool(pi.affinity or pi.anti_affinity or self.forbidden_by_existing)


NamespaceLabels = Callable[[str], Mapping[str, str] | None]
"""A namespace's labels by name (the scheduler's namespaces informer); None: not known."""


def no_namespaces(_name: str) -> Mapping[str, str] | None:
    """The lookup where no namespace is known: a non-empty namespaceSelector selects nothing."""
    return None


def _selects_namespace(term: Mapping[str, Any], owner_ns: str, ns: str, namespace_labels: NamespaceLabels) -> bool:
    """Whether a term (of a pod in `owner_ns`) selects pods of namespace `ns`.

    kube's AffinityTerm: the term's `namespaces` together with those its `namespaceSelector`
    selects; the pod's own namespace when it has neither (no selector, no names); an empty
    selector (`{}`) selects every namespace.  A non-empty selector reads the namespace's labels,
    so a namespace the scheduler does not know is not selected by it."""
    names = term.get("namespaces") or ()
    if ns in names:
        return True
    selector = term.get("namespaceSelector")
    if not isinstance(selector, Mapping):
        return not names and ns == owner_ns
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return True
    labels = namespace_labels(ns)
    return labels is not None and label_selector_matches(selector, labels)


def _term_matches(term: Mapping[str, Any], owner_ns: str, other: PodInfo, namespace_labels: NamespaceLabels) -> bool:
    """Whether `other` is one of the pods a term (of a pod in `owner_ns`) selects."""
    return _selects_namespace(term, owner_ns, other.namespace, namespace_labels) and label_selector_matches(
        term.get("labelSelector"), other.labels
    )


def pre_filter(
    pi: PodInfo, nodes: Sequence[NodeInfo], namespace_labels: NamespaceLabels = no_namespaces
) -> AffinityState:
    forbidden: set[tuple[str, str]] = set()
    if any(ni.pods_with_anti_affinity for ni in nodes):
        for ni in nodes:
            if not ni.pods_with_anti_affinity:
                continue
            for other in ni.pods.values():
                for term in other.anti_affinity:
                    key = term.get("topologyKey") or ""
                    if key in ni.labels and _term_matches(term, other.namespace, pi, namespace_labels):
                        forbidden.add((key, ni.labels[key]))

    aff_counts: list[dict[str, int]] = [{} for _ in pi.affinity]
    anti_counts: list[dict[str, int]] = [{} for _ in pi.anti_affinity]
    any_affinity_match = False
    if pi.affinity or pi.anti_affinity:
        for ni in nodes:
            for other in ni.pods.values():
                for i, term in enumerate(pi.affinity):
                    key = term.get("topologyKey") or ""
                    if _term_matches(term, pi.namespace, other, namespace_labels):
                        any_affinity_match = True
                        if key in ni.labels:
                            aff_counts[i][ni.labels[key]] = aff_counts[i].get(ni.labels[key], 0) + 1
                for i, term in enumerate(pi.anti_affinity):
                    key = term.get("topologyKey") or ""
                    if key in ni.labels and _term_matches(term, pi.namespace, other, namespace_labels):
                        anti_counts[i][ni.labels[key]] = anti_counts[i].get(ni.labels[key], 0) + 1
    matches_self = all(_term_matches(t, pi.namespace, pi, namespace_labels) for t in pi.affinity)
    return AffinityState(
        forbidden_by_existing=forbidden,
        affinity_counts=aff_counts,
        anti_affinity_counts=anti_counts,
        affinity_matches_nobody=bool(pi.affinity) and not any_affinity_match and matches_self,
    )


def inter_pod_affinity(state: CycleState, ni: NodeInfo) -> Status | None:
    pi, counted = state.pod, state.affinity
    for i, term in enumerate(pi.affinity):
        key = term.get("topologyKey") or ""
        value = ni.labels.get(key)
        if value is None:
            return Status(NAME, (ERR_AFFINITY,), unresolvable=True)
        if counted.affinity_counts[i].get(value, 0) == 0 and not counted.affinity_matches_nobody:
            return Status(NAME, (ERR_AFFINITY,), unresolvable=True)
    for i, term in enumerate(pi.anti_affinity):
        value = ni.labels.get(term.get("topologyKey") or "")
        if value is not None and counted.anti_affinity_counts[i].get(value, 0) > 0:
            return Status(NAME, (ERR_ANTI_AFFINITY,))
    for key, value in counted.forbidden_by_existing:
        if ni.labels.get(key) == value:
            return Status(NAME, (ERR_EXISTING_ANTI_AFFINITY,))
    return None
