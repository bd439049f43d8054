"""The pod network's pure parts: the address allocator and its saved form, the names of the
bridge, veth and namespace, and the checks of the flags and of cluster.toml's pod_network."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from components.kubelet import ipam, podnet
from components.kubelet.config import KubeletSettings, load_kubelet_settings
from components.kubelet.main import check_pod_network
from machinery.process.config import ConfigError

NET = ipam.parse_cidr("10.244.1.0/29")  # .0 network, .1 gateway, .2-.6 pods, .7 broadcast


def test_addresses_are_given_lowest_first_skipping_network_gateway_and_broadcast() -> None:
    a = ipam.Allocator(NET)
    got = [str(a.allocate(f"u{i}")) for i in range(5)]
    assert got == ["10.244.1.2", "10.244.1.3", "10.244.1.4", "10.244.1.5", "10.244.1.6"]
    assert ipam.gateway(NET) == ipaddress.IPv4Address("10.244.1.1")


def test_a_pod_keeps_its_address_and_a_released_one_is_given_again() -> None:
    a = ipam.Allocator(NET)
    first, second = a.allocate("a"), a.allocate("b")
    assert a.allocate("a") == first
    assert a.release("a") == first and a.release("a") is None
    assert a.allocate("c") == first  # the lowest free again
    assert a.allocate("b") == second


def test_a_full_cidr_is_refused_with_a_clear_error() -> None:
    a = ipam.Allocator(ipam.parse_cidr("10.0.0.0/30"))  # room for one pod
    assert str(a.allocate("a")) == "10.0.0.2"
    with pytest.raises(ipam.IpamError, match=r"pod CIDR 10.0.0.0/30 is full: all 1 pod addresses are in use"):
        a.allocate("b")


def test_the_saved_state_round_trips() -> None:
    a = ipam.Allocator(NET)
    a.allocate("a"), a.allocate("b"), a.release("a")
    again = ipam.Allocator.from_json(a.to_json(), NET)
    assert again == a and again.to_json() == {"cidr": "10.244.1.0/29", "pods": {"b": "10.244.1.3"}}
    assert ipam.Allocator.from_json(None, NET) == ipam.Allocator(NET)


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"cidr": "10.9.0.0/24", "pods": {"a": "10.9.0.2"}}, "pods still hold addresses of pod CIDR 10.9.0.0/24"),
        ({"cidr": "10.244.1.0/29", "pods": {"a": "10.244.1.1"}}, "10.244.1.1 of pod 'a' is not a pod address"),
        ({"cidr": "10.244.1.0/29", "pods": {"a": "x"}}, "not an IPv4 address"),
        ({"cidr": "10.244.1.0/29", "pods": {"a": "10.244.1.2", "b": "10.244.1.2"}}, "held by two pods"),
        ([], "not a JSON object"),
    ],
)
def test_a_bad_saved_state_is_refused(doc: object, says: str) -> None:
    with pytest.raises(ipam.IpamError, match=says):
        ipam.Allocator.from_json(doc, NET)


def test_a_changed_cidr_is_taken_when_no_pod_holds_an_address() -> None:
    assert ipam.Allocator.from_json({"cidr": "10.9.0.0/24", "pods": {}}, NET) == ipam.Allocator(NET)


@pytest.mark.parametrize(
    ("text", "says"),
    [("10.244.1.1/24", "not an IPv4 network"), ("fd00::/64", "not an IPv4 network"), ("10.0.0.0/31", "at most /30")],
)
def test_a_bad_cidr_is_refused(text: str, says: str) -> None:
    with pytest.raises(ipam.IpamError, match=says):
        ipam.parse_cidr(text)


def test_names_fit_an_interface_and_are_stable() -> None:
    long_node = "n" * 63
    names = [podnet.bridge_name(long_node), podnet.veth_name(long_node, "u" * 36)]
    assert all(len(n) <= podnet.IFNAMSIZ for n in names)
    assert podnet.bridge_name("node-1") == podnet.bridge_name("node-1") != podnet.bridge_name("node-2")
    assert podnet.veth_name("node-1", "a") != podnet.veth_name("node-2", "a") != podnet.veth_name("node-1", "b")
    assert podnet.netns_name("node-1", "a").startswith(podnet.netns_prefix("node-1"))
    assert not podnet.netns_name("node-1", "a").startswith(podnet.netns_prefix("node-2"))
    assert podnet.bridge_name("node-1").startswith("rk-")


@pytest.mark.parametrize(
    ("mode", "cidr", "euid", "says"),
    [
        ("netns", None, 0, "--pod-cidr is required with --pod-network netns"),
        ("netns", "10.244.1.0/33", 0, "--pod-cidr: '10.244.1.0/33' is not an IPv4 network"),
        ("netns", "10.244.1.0/24", 1000, "--pod-network netns needs root"),
        ("host", "10.244.1.0/24", 0, "--pod-cidr goes with --pod-network netns"),
        ("bridge", None, 0, "--pod-network must be host or netns"),
    ],
)
def test_bad_pod_network_flags_name_the_flag(mode: str, cidr: str | None, euid: int, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        check_pod_network(mode, cidr, euid, have_ip=True)


def test_good_pod_network_flags() -> None:
    assert check_pod_network("host", None, 1000, have_ip=False) is None
    assert check_pod_network("netns", "10.244.1.0/24", 0, have_ip=True) == "10.244.1.0/24"
    with pytest.raises(ValueError, match="needs iproute2"):
        check_pod_network("netns", "10.244.1.0/24", 0, have_ip=False)


def test_cluster_toml_pod_network_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text('[kubelets]\npod_network = "bridge"\n')
    with pytest.raises(ConfigError, match=r"kubelets.pod_network must be auto, host or netns, got 'bridge'"):
        load_kubelet_settings(path)
    path.write_text("[kubelets]\npod_network = 1\n")
    with pytest.raises(ConfigError, match=r"kubelets.pod_network must be a non-empty string"):
        load_kubelet_settings(path)
    path.write_text('[kubelets]\npod_network = "netns"\ncount = 3\n')
    settings = load_kubelet_settings(path)
    assert settings.network_args("node-3") == ("--pod-network", "netns", "--pod-cidr", "10.244.3.0/24")
    assert KubeletSettings().network_args("node-1") == ()
