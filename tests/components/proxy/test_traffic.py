"""Real connections through a rendered table, in private network namespaces.

    outside (192.168.77.2) --veth-- host NS: br0 10.244.1.1/24, 192.168.77.1, table applied
                                     |-- p1 10.244.1.2  server "p1"  (node-a: this node)
                                     |-- p2 10.244.1.3  server "p2"  (node-b in the slices)
                                     `-- client 10.244.1.4

Servers answer each connection with their name and the peer address they saw.  Every wait is
bounded; every namespace is deleted by name whatever happens.
"""

from __future__ import annotations

import contextlib
import ipaddress
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from components.proxy import nft, rules
from tests.components.proxy.support import endpoint, in_ns, netns, service, sh, slice_

NODE = rules.Node(
    "node-a",
    (ipaddress.IPv4Address("10.244.1.1"), ipaddress.IPv4Address("192.168.77.1")),
    ipaddress.IPv4Network("10.244.0.0/16"),
    ipaddress.IPv4Network("10.244.1.0/24"),
)
SERVER = """
import socket, sys, threading
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("0.0.0.0", 8053))
    while True:
        data, a = u.recvfrom(100)
        u.sendto(f"{sys.argv[1]} {a[0]}".encode(), a)
threading.Thread(target=udp, daemon=True).start()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080))
s.listen(128)
print("ready", flush=True)
while True:
    c, a = s.accept()
    c.sendall(f"{sys.argv[1]} {a[0]}\\n".encode())
    c.close()
"""
UDP_CLIENT = """
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(2)
u.connect((sys.argv[1], int(sys.argv[2])))
for _ in range(int(sys.argv[3])):
    try:
        u.send(b"hi")
        print(u.recv(100).decode())
    except OSError as e:
        print("ERR", type(e).__name__)
"""
CLIENT = """
import socket, sys
host, port, n, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
for _ in range(n):
    try:
        with socket.create_connection((host, port), timeout=t) as s:
            s.settimeout(t)
            data = b""
            while not data.endswith(b"\\n"):
                chunk = s.recv(100)
                if not chunk:
                    break
                data += chunk
        print(data.decode().strip() or "EMPTY")
    except OSError as e:
        print("ERR", type(e).__name__)
"""


def _services() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    p1, p2 = endpoint("10.244.1.2", "node-a"), endpoint("10.244.1.3", "node-b")
    svcs = [
        service("web", "10.96.0.50"),
        service("solo", "10.96.0.51"),
        service("np", "10.96.0.52", {"name": "http", "port": 80, "nodePort": 30080}, type="NodePort"),
        service(
            "local",
            "10.96.0.53",
            {"name": "http", "port": 80, "nodePort": 30081},
            type="NodePort",
            externalTrafficPolicy="Local",
        ),
        service(
            "sticky",
            "10.96.0.54",
            sessionAffinity="ClientIP",
            sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}},
        ),
        service("empty", "10.96.0.55", {"name": "http", "port": 80, "nodePort": 30082}, type="NodePort"),
        service("dns", "10.96.0.57", {"name": "dns", "port": 53, "protocol": "UDP"}),
        service("nodns", "10.96.0.58", {"name": "dns", "port": 53, "protocol": "UDP"}),
        service("itl", "10.96.0.59", internalTrafficPolicy="Local"),
    ]
    slices = [slice_(n, p1, p2) for n in ("web", "np", "local", "sticky", "itl")] + [slice_("solo", p1)]
    udp = slice_("dns", p1, port=8053, port_name="dns")
    udp["ports"][0]["protocol"] = "UDP"
    slices.append(udp)
    return svcs, slices


@dataclass
class Net:
    host: str
    p1: str
    p2: str
    client: str
    outside: str

    def connect(self, ns: str, addr: str, port: int, n: int = 1, timeout: float = 2.0) -> list[str]:
        out = sh(*in_ns(ns), "python3", "-c", CLIENT, addr, str(port), str(n), str(timeout), timeout=5 + n * timeout)
        return out.splitlines()


def _wire(host: str, ns: str, veth: str, ip: str, gateway: str, bridge: str | None, host_ip: str | None = None) -> None:
    sh("ip", "link", "add", veth, "netns", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
    sh(*in_ns(ns), "ip", "addr", "add", ip, "dev", "eth0")
    sh(*in_ns(ns), "ip", "link", "set", "eth0", "up")
    sh(*in_ns(ns), "ip", "route", "add", "default", "via", gateway)
    if bridge is not None:
        sh(*in_ns(host), "ip", "link", "set", veth, "master", bridge)
        # hairpin on the bridge port, as kubelet's --hairpin-mode=hairpin-veth: with
        # br_netfilter a DNAT back to the sender is bridged out of the port it came in by
        sh(*in_ns(host), "ip", "link", "set", veth, "type", "bridge_slave", "hairpin", "on")
    if host_ip is not None:
        sh(*in_ns(host), "ip", "addr", "add", host_ip, "dev", veth)
    sh(*in_ns(host), "ip", "link", "set", veth, "up")


@pytest.fixture(scope="module")
def net() -> Iterator[Net]:
    servers: list[subprocess.Popen[str]] = []
    with contextlib.ExitStack() as stack:
        host, p1, p2, client, outside = (stack.enter_context(netns(t)) for t in ("h", "a", "b", "c", "o"))
        h = in_ns(host)
        sh(*h, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1")
        sh(*h, "ip", "link", "add", "br0", "type", "bridge")
        sh(*h, "ip", "addr", "add", "10.244.1.1/24", "dev", "br0")
        sh(*h, "ip", "link", "set", "br0", "up")
        for i, (ns, ip) in enumerate(((p1, "10.244.1.2"), (p2, "10.244.1.3"), (client, "10.244.1.4"))):
            _wire(host, ns, f"v{i}", f"{ip}/24", "10.244.1.1", "br0")
        _wire(host, outside, "vo", "192.168.77.2/24", "192.168.77.1", None, "192.168.77.1/24")
        # a default route, as a node has one: traffic to a ClusterIP without endpoints is
        # routed (and then refused by the forward chain) rather than unroutable
        sh(*h, "ip", "route", "add", "default", "via", "192.168.77.2")
        for ns, name in ((p1, "p1"), (p2, "p2")):
            proc = subprocess.Popen([*in_ns(ns), "python3", "-c", SERVER, name], stdout=subprocess.PIPE, text=True)
            servers.append(proc)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        svcs, slices = _services()
        nft.apply(rules.render(svcs, slices, NODE), prefix=h)
        try:
            yield Net(host, p1, p2, client, outside)
        finally:
            for proc in servers:
                proc.kill()
                proc.communicate(timeout=10)


def test_cluster_ip_reaches_both_backends_and_keeps_the_client_address(net: Net) -> None:
    replies = net.connect(net.client, "10.96.0.50", 80, n=30)
    seen = Counter(r.split()[0] for r in replies)
    assert set(seen) == {"p1", "p2"}, replies
    # same bridge, no masquerade: br_netfilter un-DNATs the reply, the server sees the client
    assert {r.split()[1] for r in replies} == {"10.244.1.4"}


def test_a_pod_reaching_its_own_service_lands_on_itself(net: Net) -> None:
    replies = net.connect(net.p1, "10.96.0.51", 80, n=3)
    assert [r.split()[0] for r in replies] == ["p1"] * 3, replies


def test_node_port_on_the_node_address_from_the_host(net: Net) -> None:
    replies = net.connect(net.host, "10.244.1.1", 30080, n=20)
    assert {r.split()[0] for r in replies} == {"p1", "p2"}, replies
    from_outside = net.connect(net.outside, "192.168.77.1", 30080, n=4)
    assert {r.split()[1] for r in from_outside} == {"10.244.1.1"}, from_outside  # masqueraded


def test_cluster_ip_from_the_host(net: Net) -> None:
    replies = net.connect(net.host, "10.96.0.50", 80, n=10)
    assert all(r.split()[0] in ("p1", "p2") for r in replies), replies


def test_session_affinity_pins_a_client(net: Net) -> None:
    replies = net.connect(net.client, "10.96.0.54", 80, n=12)
    assert len({r.split()[0] for r in replies}) == 1, replies
    assert replies[0].split()[0] in ("p1", "p2")


def test_external_traffic_policy_local_keeps_to_this_node_and_the_client_address(net: Net) -> None:
    replies = net.connect(net.outside, "192.168.77.1", 30081, n=12)
    assert replies == ["p1 192.168.77.2"] * 12, replies
    # pods still reach every endpoint through it
    from_pod = net.connect(net.client, "192.168.77.1", 30081, n=20)
    assert {r.split()[0] for r in from_pod} == {"p1", "p2"}, from_pod


def test_udp_cluster_ip_and_udp_without_endpoints(net: Net) -> None:
    out = sh(*in_ns(net.client), "python3", "-c", UDP_CLIENT, "10.96.0.57", "53", "3", timeout=15).splitlines()
    assert out == ["p1 10.244.1.4"] * 3
    out = sh(*in_ns(net.client), "python3", "-c", UDP_CLIENT, "10.96.0.58", "53", "1", timeout=15).splitlines()
    assert out == ["ERR ConnectionRefusedError"]  # the ICMP port unreachable of the reject


def test_no_endpoints_is_refused_at_once(net: Net) -> None:
    started = time.monotonic()
    assert net.connect(net.client, "10.96.0.55", 80, n=2) == ["ERR ConnectionRefusedError"] * 2
    assert net.connect(net.host, "10.96.0.55", 80) == ["ERR ConnectionRefusedError"]
    assert net.connect(net.outside, "192.168.77.1", 30082) == ["ERR ConnectionRefusedError"]
    assert net.connect(net.client, "10.96.0.50", 81) == ["ERR ConnectionRefusedError"]  # a port it has not
    assert net.connect(net.host, "10.96.0.50", 81) == ["ERR ConnectionRefusedError"]
    assert time.monotonic() - started < 5


def test_a_second_nodes_table_on_the_same_kernel_changes_nothing(net: Net) -> None:
    h = in_ns(net.host)
    other = rules.Node(
        "node-b", (ipaddress.IPv4Address("10.244.9.1"),), NODE.cluster_cidr, ipaddress.IPv4Network("10.244.2.0/24")
    )
    svcs, slices = _services()
    assert {r.split()[0] for r in net.connect(net.client, "10.96.0.59", 80, n=6)} == {"p1"}
    nft.apply(rules.render(svcs, slices, other), prefix=h)
    try:
        # node-b's table, the newer, hooks first; it must leave node-a's pods to node-a's
        # (without its pod CIDR it would send them to p2, its own endpoint)
        assert {r.split()[0] for r in net.connect(net.client, "10.96.0.59", 80, n=10)} == {"p1"}
        assert len(nft.tables(prefix=h)) == 2
        replies = net.connect(net.client, "10.96.0.50", 80, n=20)
        assert {r.split()[0] for r in replies} == {"p1", "p2"} and {r.split()[1] for r in replies} == {"10.244.1.4"}
        assert net.connect(net.p1, "10.96.0.51", 80) == ["p1 10.244.1.1"]  # hairpin masqueraded once
        assert net.connect(net.outside, "192.168.77.1", 30081, n=4) == ["p1 192.168.77.2"] * 4
    finally:
        nft.remove(rules.table_name("node-b"), prefix=h)


def test_an_update_in_place_keeps_affinity_and_removal_leaves_nothing(net: Net) -> None:
    h = in_ns(net.host)
    svcs, slices = _services()
    first = rules.render(svcs, slices, NODE)
    pinned = net.connect(net.client, "10.96.0.54", 80)[0].split()[0]
    svcs.append(service("later", "10.96.0.56"))
    slices = [s for s in slices if s["metadata"]["name"] != "solo-abc"]  # type: ignore[index]
    second = rules.render(svcs, slices, NODE)
    nft.apply(second, first, prefix=h)
    assert net.connect(net.client, "10.96.0.54", 80, n=6) == [f"{pinned} 10.244.1.4"] * 6
    assert net.connect(net.client, "10.96.0.51", 80) == ["ERR ConnectionRefusedError"]  # solo lost its slice
    assert nft.tables(prefix=h) == [rules.table_name("node-a")]
    nft.remove(rules.table_name("node-a"), prefix=h)
    assert nft.tables(prefix=h) == []
    assert sh(*h, "nft", "list", "tables").strip() == ""
    assert net.connect(net.client, "10.96.0.50", 80, n=1, timeout=0.5)[0].startswith("ERR")
