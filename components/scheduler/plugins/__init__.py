"""The default plugin set, as kube-scheduler's default profile: which filters run, in which
order, and how the scores are weighted.  Each plugin is a module of its own (kube's
framework/plugins/<name>), a pure function of the pod, one node and the cycle's state
(`cycle.CycleState`, computed once per pod by `pre_filter`):

    nodeunschedulable   cordoned nodes                      filter
    tainttoleration     taints and tolerations              filter, score
    nodeaffinity        nodeSelector and node affinity      filter, score
    nodeports           host ports                          filter
    noderesources       requests against allocatable        filter, scores (least allocated, balanced)
    podtopologyspread   topology spread constraints         filter, score
    interpodaffinity    pod affinity and anti-affinity      filter

A node's verdict is the first failing filter's `Status` (one filter may give several reasons,
as NodeResourcesFit does).  Reasons are kube-scheduler's own strings, since users grep events
for them.  Scores are 0..100 per plugin after normalisation, summed with kube's default weights.
"""

from __future__ import annotations

from collections.abc import Sequence

from components.scheduler.nodeinfo import NodeInfo, PodInfo
from components.scheduler.plugins import (
    interpodaffinity,
    nodeaffinity,
    noderesources,
    podtopologyspread,
    tainttoleration,
)
from components.scheduler.plugins.cycle import MAX_NODE_SCORE, CycleState, Filter, Status
from components.scheduler.plugins.interpodaffinity import NamespaceLabels, inter_pod_affinity, no_namespaces
from components.scheduler.plugins.nodeaffinity import node_affinity
from components.scheduler.plugins.nodeports import node_ports
from components.scheduler.plugins.noderesources import node_resources_fit
from components.scheduler.plugins.nodeunschedulable import node_unschedulable
from components.scheduler.plugins.normalize import default_normalize
from components.scheduler.plugins.podtopologyspread import pod_topology_spread
from components.scheduler.plugins.tainttoleration import taint_toleration

FILTERS: tuple[Filter, ...] = (
    node_unschedulable,
    taint_toleration,
    node_affinity,
    node_ports,
    node_resources_fit,
    pod_topology_spread,
    inter_pod_affinity,
)

WEIGHTS = {
    noderesources.FIT: 1,
    noderesources.BALANCED_ALLOCATION: 1,
    nodeaffinity.NAME: 2,
    podtopologyspread.NAME: 2,
    tainttoleration.NAME: 3,
}


def pre_filter(pi: PodInfo, nodes: Sequence[NodeInfo], namespace_labels: NamespaceLabels = no_namespaces) -> CycleState:
    """Every plugin's PreFilter over the nodes, and the filters that can reject this pod
    (`namespace_labels`: what affinity terms' namespace selectors read)."""
    spread = podtopologyspread.pre_filter(pi, nodes)
    affinity = interpodaffinity.pre_filter(pi, nodes, namespace_labels)
    tolerations = tainttoleration.tolerations_of(pi.pod)
    skip: set[Filter] = set()
    if not nodeaffinity.selects_nodes(pi.pod):
        skip.add(node_affinity)
    if not pi.ports:
        skip.add(node_ports)
    if not spread.hard:
        skip.add(pod_topology_spread)
    if not affinity.can_reject(pi):
        skip.add(inter_pod_affinity)
    return CycleState(
        pod=pi,
        tolerations=tolerations,
        prefer_tolerations=tainttoleration.prefer_no_schedule_tolerations(tolerations),
        filters=tuple(f for f in FILTERS if f not in skip),
        spread=spread,
        affinity=affinity,
    )


def run_filters(state: CycleState, ni: NodeInfo) -> Status | None:
    """The first failing filter's status, or None when the node can take the pod."""
    for f in state.filters:
        status = f(state, ni)
        if status is not None:
            return status
    return None


def score_nodes(state: CycleState, nodes: Sequence[NodeInfo]) -> list[int]:
    """The weighted total score of each node, in order."""
    fit_weight, balanced_weight = WEIGHTS[noderesources.FIT], WEIGHTS[noderesources.BALANCED_ALLOCATION]
    totals = []
    for ni in nodes:
        least, balanced = noderesources.resource_scores(state, ni)
        totals.append(fit_weight * least + balanced_weight * balanced)
    if nodeaffinity.has_preferred_node_affinity(state.pod.pod):
        raw = [nodeaffinity.preferred_node_affinity(state, ni) for ni in nodes]
        for i, s in enumerate(default_normalize(raw, reverse=False)):
            totals[i] += WEIGHTS[nodeaffinity.NAME] * s
    if any(ni.soft_taints for ni in nodes):
        raw = [tainttoleration.intolerable_prefer_no_schedule(state, ni) for ni in nodes]
        for i, s in enumerate(default_normalize(raw, reverse=True)):
            totals[i] += WEIGHTS[tainttoleration.NAME] * s
    else:  # nothing to tolerate anywhere: every node gets the full score
        totals = [t + WEIGHTS[tainttoleration.NAME] * MAX_NODE_SCORE for t in totals]
    if podtopologyspread.ranks_nodes(state):
        raw = [podtopologyspread.spread_count(state, ni) for ni in nodes]
        for i, s in enumerate(podtopologyspread.normalize(raw)):
            totals[i] += WEIGHTS[podtopologyspread.NAME] * s
    return totals
