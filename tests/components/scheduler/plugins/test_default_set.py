"""The default plugin set: which filters a cycle runs, and how the scores add up."""

from __future__ import annotations

from components.scheduler.nodeinfo import PodInfo
from components.scheduler.plugins import FILTERS, WEIGHTS, pre_filter, run_filters, score_nodes
from components.scheduler.plugins.nodeaffinity import node_affinity
from components.scheduler.plugins.nodeports import node_ports
from components.scheduler.plugins.noderesources import balanced_allocation, least_allocated
from tests.components.scheduler.support import infos, node, pod


def test_filters_a_pod_cannot_fail_are_skipped_without_changing_a_verdict() -> None:
    """A cycle runs only the filters that can reject its pod; running every filter agrees."""
    plain = PodInfo.of(pod("p", cpu="100m"))
    nodes = infos(
        node("a"),
        node("b", unschedulable=True),
        node("c", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        node("d", ready="False"),
        node("e", cpu="50m"),
    )
    state = pre_filter(plain, nodes)
    assert node_ports not in state.filters and node_affinity not in state.filters
    for ni in nodes:
        everything = next((s for f in FILTERS if (s := f(state, ni)) is not None), None)
        assert run_filters(state, ni) == everything, ni.name


def test_a_plain_pod_scores_the_weighted_resource_scores_and_full_taint_score() -> None:
    """No preferences, taints or owners: the total is the resource scores, weighted, plus
    TaintToleration's full score (nothing to tolerate anywhere)."""
    empty, busy = infos(node("a"), node("b"), placed={"b": [pod("x", cpu="3", memory="1Gi", node_name="b")]})
    state = pre_filter(PodInfo.of(pod("p", cpu="100m", memory="100Mi")), [empty, busy])
    assert score_nodes(state, [empty, busy]) == [
        WEIGHTS["NodeResourcesFit"] * least_allocated(state, ni)
        + WEIGHTS["NodeResourcesBalancedAllocation"] * balanced_allocation(state, ni)
        + WEIGHTS["TaintToleration"] * 100
        for ni in (empty, busy)
    ]
