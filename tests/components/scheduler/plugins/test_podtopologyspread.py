"""PodTopologySpread: DoNotSchedule constraints filter, ScheduleAnyway ones and owners score."""

from __future__ import annotations

from components.scheduler.nodeinfo import PodInfo
from components.scheduler.plugins import podtopologyspread, pre_filter, run_filters, score_nodes
from tests.components.scheduler.support import infos, node, pod


def test_topology_spread_do_not_schedule() -> None:
    c = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"g": "1"}},
        }
    ]
    placed = {"n1": [pod("a", labels={"g": "1"}, node_name="n1")]}
    nodes = infos(node("n1"), node("n2"), placed=placed)
    state = pre_filter(PodInfo.of(pod("p", labels={"g": "1"}, topologySpreadConstraints=c)), nodes)
    s = run_filters(state, nodes[0])
    assert s is not None and s.reasons == ("node(s) didn't match pod topology spread constraints",)
    assert run_filters(state, nodes[1]) is None
    c[0]["topologyKey"] = "zone"
    nodes = infos(node("n1", labels={"zone": "a"}), node("n2"))
    state = pre_filter(PodInfo.of(pod("p", labels={"g": "1"}, topologySpreadConstraints=c)), nodes)
    s = run_filters(state, nodes[1])
    assert s is not None and s.reasons == (podtopologyspread.ERR_SPREAD_MISSING_LABEL,)


def test_pods_of_one_owner_spread_over_hostnames_without_constraints() -> None:
    a, b = infos(node("a"), node("b"), placed={"a": [pod("x", owner="rs1", node_name="a")]})
    state = pre_filter(PodInfo.of(pod("p", owner="rs1")), [a, b])
    s = score_nodes(state, [a, b])
    assert s[1] > s[0]


def test_schedule_anyway_constraints_score_and_never_filter() -> None:
    soft = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"g": "1"}},
        }
    ]
    a, b = infos(node("a"), node("b"), placed={"a": [pod("x", labels={"g": "1"}, node_name="a")]})
    state = pre_filter(PodInfo.of(pod("p", labels={"g": "1"}, topologySpreadConstraints=soft)), [a, b])
    assert run_filters(state, a) is None  # soft: never a filter
    s = score_nodes(state, [a, b])
    assert s[1] > s[0]
