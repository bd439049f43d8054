"""NodeAffinity: nodeSelector and required node affinity filter, preferred terms score."""

from __future__ import annotations

from components.scheduler.nodeinfo import PodInfo
from components.scheduler.plugins import nodeaffinity, pre_filter, score_nodes
from tests.components.scheduler.support import infos, node, pod, verdict


def test_node_selector_and_required_affinity_operators() -> None:
    n = node("n", labels={"zone": "a", "size": "5"})
    assert verdict(pod("p", nodeSelector={"zone": "a"}), n) == ""
    assert verdict(pod("p", nodeSelector={"zone": "b"}), n) == "node(s) didn't match Pod's node affinity/selector"

    def req(*exprs: dict, fields: list[dict] | None = None) -> dict:
        term: dict = {"matchExpressions": list(exprs)}
        if fields:
            term["matchFields"] = fields
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}

    cases = [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "In", "values": ["b"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["b"]}, True),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "gpu", "operator": "Exists"}, False),
        ({"key": "gpu", "operator": "DoesNotExist"}, True),
        ({"key": "zone", "operator": "DoesNotExist"}, False),
        ({"key": "size", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "size", "operator": "Gt", "values": ["5"]}, False),
        ({"key": "size", "operator": "Lt", "values": ["6"]}, True),
        ({"key": "size", "operator": "Lt", "values": ["5"]}, False),
        ({"key": "zone", "operator": "Gt", "values": ["1"]}, False),  # not a number
    ]
    for expr, fits in cases:
        assert (verdict(pod("p", affinity=req(expr)), n) == "") is fits, expr
    by_name = {"key": "metadata.name", "operator": "In", "values": ["n"]}
    assert verdict(pod("p", affinity=req(fields=[by_name])), n) == ""
    other = {"key": "metadata.name", "operator": "In", "values": ["m"]}
    assert verdict(pod("p", affinity=req(fields=[other])), n) != ""
    empty = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}
    assert verdict(pod("p", affinity=empty), n) != ""


def test_preferred_terms_add_their_weight() -> None:
    a, b = infos(node("a", labels={"disk": "ssd"}), node("b"))
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                }
            ]
        }
    }
    state = pre_filter(PodInfo.of(pod("p", affinity=pref)), [b, a])
    assert nodeaffinity.preferred_node_affinity(state, a) == 50
    s = score_nodes(state, [b, a])
    assert s[1] > s[0]
