"""NodeUnschedulable: a cordoned node takes only pods tolerating its unschedulable taint."""

from __future__ import annotations

from tests.components.scheduler.support import node, pod, verdict


def test_a_cordoned_node_takes_only_pods_that_tolerate_it() -> None:
    assert verdict(pod("p"), node("n", unschedulable=True)) == "node(s) were unschedulable"
    tolerant = pod("p", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert verdict(tolerant, node("n", unschedulable=True)) == ""
