"""components/kubelet/hostports.py: which ports a pod maps, the table nft takes (checked by nft
itself in a network namespace of the test's own), and hostile pod specs."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet import hostports

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")  # CI runs as root


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"rkhp-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def pod(*ports: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "ports": list(ports)}]}}


def test_which_ports_are_mapped_and_where() -> None:
    mapped = hostports.mappings_of(
        pod(
            {"containerPort": 8080, "hostPort": 54323},
            {"containerPort": 8080, "hostPort": 54323, "hostIP": "127.0.0.1"},
            {"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "0.0.0.0"},
            {"containerPort": 9090},  # no hostPort: not mapped
            {"containerPort": 1, "hostPort": 70000},  # out of range
            {"containerPort": 1, "hostPort": True},  # not a port
        ),
        "10.244.1.7",
        "10.244.1.1",
    )
    node, pod_ip, local = (ipaddress.IPv4Address(a) for a in ("10.244.1.1", "10.244.1.7", "127.0.0.1"))
    assert mapped == [
        hostports.Mapping(node, "tcp", 54323, pod_ip, 8080),
        hostports.Mapping(local, "tcp", 54323, pod_ip, 8080),
        hostports.Mapping(node, "udp", 5353, pod_ip, 53),
    ]


def test_the_table_is_what_nft_takes(netns: str) -> None:
    mapped = hostports.mappings_of(
        pod({"containerPort": 8080, "hostPort": 8081}, {"containerPort": 53, "hostPort": 53, "protocol": "UDP"}),
        "10.244.1.7",
        "10.244.1.1",
    )
    text = hostports.render("node-1", mapped)
    assert "ip daddr 10.244.1.1 tcp dport 8081 dnat to 10.244.1.7:8080" in text
    assert "ip daddr 10.244.1.1 udp dport 53 dnat to 10.244.1.7:53" in text
    done = subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "list", "tables"], capture_output=True, text=True, check=True
    )
    assert hostports.table_name("node-1") in listed.stdout


@settings(max_examples=150, deadline=None)
@given(
    ports=st.lists(
        st.dictionaries(
            st.sampled_from(["containerPort", "hostPort", "hostIP", "protocol"]),
            st.one_of(st.none(), st.booleans(), st.integers(-5, 70000), st.text(max_size=16), st.just("127.0.0.1")),
        ),
        max_size=4,
    ),
    pod_ip=st.one_of(st.just("10.244.1.9"), st.text(max_size=10)),
)
def test_hostile_ports_never_raise_and_render_only_checked_values(ports: list[dict[str, Any]], pod_ip: str) -> None:
    for m in hostports.mappings_of(pod(*ports), pod_ip, "10.244.1.1"):
        assert 0 < m.host_port < 65536 and 0 < m.container_port < 65536 and m.protocol in ("tcp", "udp", "sctp")
    hostports.render("node-1", hostports.mappings_of(pod(*ports), pod_ip, "10.244.1.1"))
