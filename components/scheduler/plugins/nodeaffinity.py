"""NodeAffinity: the pod's `nodeSelector` and required node affinity decide which nodes it may
go to (a filter); its preferred node affinity adds each matching term's weight (a score).
Node selector terms mean what `machinery.selectors.node_selector_term_matches` says (kube's
component-helpers nodeaffinity); the terms of the required affinity are ORed."""

from __future__ import annotations

from components.scheduler.nodeinfo import NodeInfo
from components.scheduler.plugins.cycle import CycleState, Status
from machinery.objects import Obj
from machinery.selectors import node_selector_term_matches

NAME = "NodeAffinity"
ERR_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def _node_affinity(pod: Obj) -> Obj:
    return ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}


def node_matches_pod_selectors(pod: Obj, ni: NodeInfo) -> bool:
    """nodeSelector (every label equal) and required node affinity (terms are ORed)."""
    spec = pod.get("spec") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if ni.labels.get(k) != v:
            return False
    required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        terms = required.get("nodeSelectorTerms") or ()
        if not any(node_selector_term_matches(t, ni.labels, ni.name) for t in terms):
            return False
    return True


def selects_nodes(pod: Obj) -> bool:
    """Whether a nodeSelector or required node affinity can rule out a node."""
    if (pod.get("spec") or {}).get("nodeSelector"):
        return True
    return _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution") is not None


def node_affinity(state: CycleState, ni: NodeInfo) -> Status | None:
    if node_matches_pod_selectors(state.pod.pod, ni):
        return None
    return Status(NAME, (ERR_NODE_AFFINITY,), unresolvable=True)


def has_preferred_node_affinity(pod: Obj) -> bool:
    return bool(_node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution"))


def preferred_node_affinity(state: CycleState, ni: NodeInfo) -> int:
    """The raw score: the summed weights of the preferred terms the node matches."""
    total = 0
    for pref in _node_affinity(state.pod.pod).get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        w = int(pref.get("weight") or 0)
        if w and node_selector_term_matches(pref.get("preference") or {}, ni.labels, ni.name):
            total += w
    return total
