"""Hosts of their own for real (root only): two namespaces on a bridge, each with its address;
a server on one is reached from the other and from the root namespace at that address (and
not at 127.0.0.1); a pulled cable cuts it off and a plugged one brings it back; `ensure` is
idempotent and repairs; `remove_all` leaves no namespace, veth or bridge; a node host keeps the
machine's mounts, forwards and is routed to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.cli.cluster_network import CLUSTER_CIDR
from machinery.process import hosts
from machinery.process.hosts import HostNetwork
from machinery.process.iproute import link_exists
from tests.support.network import free_cidr
from tests.support.wait import until

ROOT = Path(__file__).resolve().parents[3]  # the checkout: the probe imports our iproute
SERVER = (  # socketserver's, not http.server's: HTTPServer looks its own name up in DNS, unreachable here
    "import http.server as h, socketserver as s; "
    "s.TCPServer(('{ip}', 8080), h.SimpleHTTPRequestHandler).serve_forever()"
)


@pytest.fixture
def net(tmp_path: Path) -> Iterator[HostNetwork]:
    n = HostNetwork(f"test-{uuid.uuid4().hex}", free_cidr())
    try:
        yield n
    finally:
        n.remove_all()


def _fetch(net: HostNetwork, host: str | None, url: str) -> bool:
    argv = [sys.executable, "-c", f"import urllib.request as u; u.urlopen({url!r}, timeout=1).read()"]
    argv = net.argv(host, argv) if host else argv
    return subprocess.run(argv, capture_output=True, timeout=10, check=False).returncode == 0


def test_two_hosts_reach_each_other_by_address_and_the_root_namespace_reaches_both(net: HostNetwork) -> None:
    a, b = str(net.address(1)), str(net.address(2))
    net.ensure("a", a)
    net.ensure("b", b)
    net.ensure("a", a)  # again: nothing to do
    assert net.hosts() == ["a", "b"]
    server = subprocess.Popen(net.argv("a", [sys.executable, "-c", SERVER.format(ip=a)]), cwd="/")
    try:
        url = f"http://{a}:8080/"
        assert until("the server answers from b", lambda: _fetch(net, "b", url), wait=10)
        assert _fetch(net, None, url)  # the root namespace, over the bridge
        assert not _fetch(net, None, "http://127.0.0.1:8080/")  # it is not on this host's loopback
        net.set_link("a", up=False)
        assert not _fetch(net, "b", url)
        net.set_link("a", up=True)
        assert until("back once the cable is in", lambda: _fetch(net, "b", url), wait=10)
    finally:
        server.kill()
        server.wait(timeout=10)
    assert net.remove_all() == 2
    assert net.hosts() == [] and not link_exists(net.bridge)
    assert not link_exists(net.veth("a")) and not link_exists(net.veth("b"))


def test_ensure_repairs_a_host_whose_link_was_removed(net: HostNetwork) -> None:
    a = str(net.address(1))
    net.ensure("a", a)
    subprocess.run(["ip", "link", "del", net.veth("a")], check=True, timeout=10)
    net.ensure("a", a)
    argv = ["ip", "-n", net.netns("a"), "-4", "addr"]
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True)
    assert f"{a}/" in shown.stdout and link_exists(net.veth("a"))


PROBE = """
import json, os, socket
from machinery.process.iproute import link_exists
print(json.dumps({
    "net": os.readlink("/proc/self/ns/net"),
    "mnt": os.readlink("/proc/self/ns/mnt"),
    "cgroup2": any(" - cgroup2 " in line for line in open("/proc/self/mountinfo")),
    "eth0": link_exists("eth0"),
    "forwarding": open("/proc/sys/net/ipv4/ip_forward").read().strip(),
}))
"""


def test_a_node_host_keeps_the_machines_mounts_forwards_and_is_routed_to(net: HostNetwork) -> None:
    """What a node's kubelet needs of its host: only the network namespace entered (the
    machine's mount namespace, its cgroup2 hierarchy there), its links seen as its own,
    forwarding on, and this machine's packets for its pods' CIDR routed to it."""
    a = str(net.address(1))
    net.ensure("n1", a)
    net.forward("n1")
    argv = net.argv_sharing_mounts("n1", [sys.executable, "-c", PROBE])
    seen = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True, cwd=ROOT).stdout)
    host_ns = f"net:[{os.stat(net.netns_path('n1')).st_ino}]"
    assert seen == {
        "net": host_ns,
        "mnt": os.readlink("/proc/self/ns/mnt"),
        "cgroup2": any(" - cgroup2 " in line for line in Path("/proc/self/mountinfo").read_text().splitlines()),
        "eth0": True,
        "forwarding": "1",
    }
    pods = "198.51.100.0/24"  # TEST-NET-2: a node's pod CIDR stands in
    subprocess.run(["ip", "-n", net.netns("n1"), "addr", "add", "198.51.100.1/32", "dev", "lo"], check=True, timeout=10)
    net.route(pods, "n1", a)
    net.route(pods, "n1", a)  # again: replaced, not refused
    server = subprocess.Popen(net.argv_sharing_mounts("n1", [sys.executable, "-c", SERVER.format(ip="198.51.100.1")]))
    try:
        assert until(
            "the host's pod address answers from here", lambda: _fetch(net, None, "http://198.51.100.1:8080/"), 10
        )
    finally:
        server.kill()
        server.wait(timeout=10)
    net.remove_all()
    routes = subprocess.run(["ip", "route", "show", pods], capture_output=True, text=True, timeout=10, check=True)
    assert routes.stdout == ""  # it went with the bridge


def test_a_free_subnet_is_never_in_the_pod_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every draw that falls in 10.244.0.0/16 is refused: the pod CIDRs are not routed yet when
    a hosts' LAN is chosen, and 10.244.1.0/24 would make this machine node-1's gateway."""
    assert str(hosts.POD_NETWORK) == CLUSTER_CIDR  # the two must agree
    draws = iter([244, 1, 244, 2, 201, 7])
    monkeypatch.setattr(hosts.random.Random, "randint", lambda _self, _a, _b: next(draws))
    assert hosts.free_subnet() == "10.201.7.0/24"
