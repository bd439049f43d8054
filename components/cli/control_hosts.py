"""Hosts of their own for the controller-managers, the schedulers and the hollow nodes, when
the store's members and an HA set's apiservers have theirs (`raftkube up --hosts netns` with
`[apiserver] count` >= 2): then every part of the control plane sits at its own address on the
hosts' LAN, as separate machines would, and a partition of any of them from the apiservers is
the kernel's (a pulled cable, nft drops), with TLS on.

    store-<i>                   host <i>    the LAN's (10+i)th address   (store.launcher)
    apiserver-<n>               host a<n>   (20+n)th                     (apiserver_set)
    controller-manager[-<n>]    host c<n>   (30+n)th
    scheduler[-<n>]             host s<n>   (40+n)th
    hollow-nodes                host k1     51st
    kubelet-node-<i>, proxy-node-<i>
    (and cluster-dns on node-1) host n<i>   (60+i)th   on the pod network only

A node host is a node machine: its kubelet makes the pod network in the host's namespace (the
node's bridge at 10.244.<i>.1, the pods' namespaces and veths, its host ports table), its
service proxy programs the host's nftables, and node-1's host serves the cluster DNS at its
bridge address.  The host forwards, and this machine routes each node's pod CIDR to its host
(machinery.process.hosts), so pods of different nodes, the apiservers (exec, logs) and the
user's tools reach pods and NodePorts over the LAN, as on a cluster of machines.  A node's
parts enter only the host's network namespace (HostNetwork.argv_sharing_mounts): a kubelet
needs the machine's cgroups and mounts.

Decisions: a single apiserver stays on this machine's loopback, where a component in a
namespace cannot reach it, so the components stay too; the balancer stays on this machine;
kubelets on the host's network (`pod_network = "host"`) stay too, their pods sharing this
machine's ports, as without hosts.  Components on hosts dial the apiservers' LAN addresses (the
kubeconfig's `raftkube.io/apiservers`), never the balancer.
"""

from __future__ import annotations

from pathlib import Path

from components.cli.apiserver_set import ApiserverSet
from components.cli.launcher import CLUSTER_DNS, KUBELET, MOVABLE, PROXY, REPLICA, OnHost
from machinery.process.hosts import HostsError
from machinery.process.launch import LauncherError

HOSTS = {"controller-manager": ("c", 30), "scheduler": ("s", 40), "hollow-nodes": ("k", 50)}
"""A movable component's host letter and the offset of its hosts' addresses on the LAN."""
assert set(HOSTS) == set(MOVABLE)
NODE_HOSTS = ("n", 60)
"""A node's host letter (n<i> for node-<i>) and the offset of the node hosts' addresses."""
DNS_NODE = "node-1"  # the cluster DNS server listens on its bridge address (cluster_network)


def _which(name: str) -> tuple[str, int]:
    """scheduler-2: ("scheduler", 2); scheduler: ("scheduler", 1)."""
    m = REPLICA.match(name)
    return (m["of"], int(m["n"])) if m else (name, 1)


def host_name(name: str) -> str:
    """controller-manager: c1, scheduler-2: s2, hollow-nodes: k1."""
    base, n = _which(name)
    return f"{HOSTS[base][0]}{n}"


def place(data_dir: Path, name: str) -> OnHost | None:
    """The host `name` runs on (made if missing), or None when the control plane is not on
    hosts of its own."""
    apiservers = ApiserverSet(data_dir)
    net = apiservers.host_network()
    if net is None or not apiservers.is_ha():
        return None
    base, n = _which(name)
    host, address = host_name(name), str(net.address(HOSTS[base][1] + n))
    try:
        net.ensure(host, address)
    except HostsError as e:
        raise LauncherError(f"{name}: {e}") from None
    return OnHost(tuple(net.argv(host, [])), address)


def node_of(name: str) -> str | None:
    """The node whose host a node part runs on: kubelet-node-2 and proxy-node-2: node-2;
    cluster-dns: node-1; anything else: None."""
    if name == CLUSTER_DNS:
        return DNS_NODE
    m = KUBELET.match(name) or PROXY.match(name)
    return m["node"] if m else None


def node_host(node: str) -> str:
    """node-2: n2."""
    return f"{NODE_HOSTS[0]}{_node_index(node)}"


def _node_index(node: str) -> int:
    index = node.removeprefix("node-")
    if not index.isdigit() or not 0 < int(index) <= 180:
        raise LauncherError(f"{node}: a node on a host of its own is node-<1..180>")
    return int(index)


def place_node_part(data_dir: Path, name: str, pod_cidr: str) -> OnHost | None:
    """The host of the node `name` belongs to (made if missing; for the kubelet, forwarding and
    this machine routing `pod_cidr` to it), or None when the control plane is not on hosts of its own.
    Only for the pod network: on the host's network the kubelets stay on this machine."""
    node = node_of(name)
    apiservers = ApiserverSet(data_dir)
    net = apiservers.host_network()
    if node is None or net is None or not apiservers.is_ha():
        return None
    host, address = node_host(node), str(net.address(NODE_HOSTS[1] + _node_index(node)))
    try:
        net.ensure(host, address)
        if KUBELET.match(name):  # once per node: its proxy and the DNS server start after it
            net.forward(host)
            net.route(pod_cidr, host, address)
    except HostsError as e:
        raise LauncherError(f"{name}: {e}") from None
    return OnHost(tuple(net.argv_sharing_mounts(host, [])), address)
