"""Where a component runs when it has a host of its own (components.cli.control_hosts,
launcher.OnHost), at the lowest layer: the host names, the parts that may move, and the record
a restart starts from (a damaged one means this machine, not a crash).  The processes on real
hosts are in test_ha_apiservers.py and test_node_hosts.py (root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.cli import control_hosts
from components.cli.launcher import HOST_FILE, LocalComponent, OnHost
from machinery.process.launch import LauncherError


@pytest.mark.parametrize(
    ("name", "host"),
    [("controller-manager", "c1"), ("controller-manager-2", "c2"), ("scheduler", "s1"), ("scheduler-3", "s3"),
     ("hollow-nodes", "k1")],
)  # fmt: skip
def test_each_movable_part_has_a_host_name_of_its_own(name: str, host: str) -> None:
    assert control_hosts.host_name(name) == host


@pytest.mark.parametrize(
    ("name", "node", "host"),
    [("kubelet-node-1", "node-1", "n1"), ("proxy-node-12", "node-12", "n12"), ("cluster-dns", "node-1", "n1")],
)
def test_a_nodes_parts_go_on_its_host(tmp_path: Path, name: str, node: str, host: str) -> None:
    """The DNS server on node-1's: it listens on node-1's bridge address."""
    assert control_hosts.node_of(name) == node and control_hosts.node_host(node) == host
    LocalComponent(tmp_path, name, (), OnHost(("nsenter", "--net=/run/netns/x", "--"), "10.0.0.5"))


@pytest.mark.parametrize("name", ["scheduler", "hollow-nodes", "apiserver-balancer"])
def test_only_a_nodes_parts_have_a_node(name: str) -> None:
    assert control_hosts.node_of(name) is None


@pytest.mark.parametrize("node", ["node-0", "node-181", "node-x", "worker"])
def test_a_node_without_a_host_index_is_refused(node: str) -> None:
    with pytest.raises(LauncherError, match=r"node-<1\.\.180>"):
        control_hosts.node_host(node)


def test_the_balancer_serves_this_machine_and_cannot_move(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot run on a host of its own"):
        LocalComponent(tmp_path, "apiserver-balancer", (), OnHost(("ip", "netns", "exec", "x"), "10.0.0.5"))


def test_without_hosts_the_control_plane_and_the_nodes_stay_here(tmp_path: Path) -> None:
    assert control_hosts.place(tmp_path, "scheduler") is None
    assert control_hosts.place_node_part(tmp_path, "kubelet-node-1", "10.244.1.0/24") is None


def test_the_recorded_host_is_read_back(tmp_path: Path) -> None:
    part = LocalComponent(tmp_path, "scheduler")
    (tmp_path / "scheduler").mkdir()
    record = {"prefix": ["ip", "netns", "exec", "rkh-1-s1"], "address": "10.77.0.51"}
    (tmp_path / "scheduler" / HOST_FILE).write_text(json.dumps(record))
    assert part.placed() == OnHost(("ip", "netns", "exec", "rkh-1-s1"), "10.77.0.51")


@given(st.one_of(st.binary(max_size=64), st.just(b'{"prefix": 1}'), st.just(b'{"address": "x"}'), st.just(b"[]")))
def test_a_damaged_host_record_means_this_machine(tmp_path_factory: pytest.TempPathFactory, text: bytes) -> None:
    base = tmp_path_factory.mktemp("d")
    (base / "scheduler").mkdir()
    (base / "scheduler" / HOST_FILE).write_bytes(text)
    (base / "scheduler" / "health.json").write_bytes(text)
    part = LocalComponent(base, "scheduler")
    assert part.placed() is None
    assert part.health_address() == "127.0.0.1"
