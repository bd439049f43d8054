"""NodePorts: a host port taken on a node keeps pods asking for it away."""

from __future__ import annotations

from tests.components.scheduler.support import node, pod, verdict


def test_host_ports() -> None:
    n = node("n")
    used = [pod("a", node_name="n", ports=[{"containerPort": 80, "hostPort": 8080}])]
    want = pod("p", ports=[{"containerPort": 80, "hostPort": 8080}])
    assert verdict(want, n, used) == "node(s) didn't have free ports for the requested pod ports"
    assert verdict(pod("p", ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]), n, used) == ""
    assert verdict(pod("p", ports=[{"containerPort": 80, "hostPort": 8081}]), n, used) == ""
