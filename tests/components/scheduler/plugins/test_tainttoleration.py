"""TaintToleration: hard taints filter, PreferNoSchedule taints lower the score."""

from __future__ import annotations

from components.scheduler.nodeinfo import PodInfo
from components.scheduler.plugins import pre_filter, score_nodes
from tests.components.scheduler.support import infos, node, pod, verdict


def test_not_ready_and_unreachable_nodes_carry_their_taints() -> None:
    assert (
        verdict(pod("p"), node("n", ready="False")) == "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    )
    assert verdict(pod("p"), node("n", ready="Unknown")) == (
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
    )


def test_taints_and_tolerations() -> None:
    n = node("n", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    assert verdict(pod("p"), n) == "node(s) had untolerated taint {k: v}"
    assert verdict(pod("p", tolerations=[{"key": "k", "value": "v"}]), n) == ""
    assert verdict(pod("p", tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]), n) == ""
    assert verdict(pod("p", tolerations=[{"operator": "Exists"}]), n) == ""
    assert verdict(pod("p", tolerations=[{"key": "k", "value": "w"}]), n) != ""
    assert verdict(pod("p", tolerations=[{"key": "k", "value": "v", "effect": "NoExecute"}]), n) != ""
    no_exec = node("n", taints=[{"key": "k", "effect": "NoExecute"}])
    assert verdict(pod("p"), no_exec) == "node(s) had untolerated taint {k: }"
    prefer = node("n", taints=[{"key": "k", "effect": "PreferNoSchedule"}])
    assert verdict(pod("p"), prefer) == ""


def test_untolerated_prefer_no_schedule_taints_lower_the_score() -> None:
    a, b = infos(node("a", taints=[{"key": "k", "effect": "PreferNoSchedule"}]), node("b"))
    state = pre_filter(PodInfo.of(pod("p")), [a, b])
    s = score_nodes(state, [a, b])
    assert s[1] > s[0]
