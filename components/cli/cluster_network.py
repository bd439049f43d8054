"""The network `raftkube up` gives a local cluster: which pod network, and what each part is
told about it.

`pod_network = "auto"` (cluster.toml's default) is the pod network where it can be had — root,
iproute2's `ip` and the `nft` tool — and the host's network otherwise, said once.  On the pod
network (as DESIGN.md's Networking):

* node-<i> owns 10.244.<i>.0/24 and its bridge's address 10.244.<i>.1 is the node's InternalIP:
  the kubelet serves there, NodePorts answer there, and hostNetwork pods have it;
* net.ipv4.ip_forward is turned on (pods of one node reach those of another through the host,
  whose routes to every bridge are its own); `down` leaves it on, as Docker and kube do — another
  cluster on this machine may need it;
* a service proxy per node (`raftkube proxy`, components/proxy) programs nftables from the
  Services and EndpointSlices; the cluster DNS server (`raftkube dns`, components/dns) listens on
  node-1's bridge address and registers itself as kube-system/kube-dns with the service CIDR's
  tenth address (10.96.0.10), which every kubelet writes into its pods' resolv.conf.

On the host's network neither runs: pods share the host's ports and loopback, and their
resolv.conf is the node's.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from components.kubelet.config import KubeletSettings

CLUSTER_CIDR = "10.244.0.0/16"
DNS_OFFSET = 10  # kube's convention: the DNS Service is the service CIDR's tenth address
FORWARDING = Path("/proc/sys/net/ipv4/ip_forward")


def pod_network_missing() -> str | None:
    """Why the pod network cannot be had here, or None when it can."""
    if os.geteuid() != 0:
        return "it needs root"
    missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
    if missing:
        return f"it needs {' and '.join(missing)} on PATH"
    return None


def resolve(mode: str) -> str:
    """`auto` made concrete (and said, when it falls back to the host's network)."""
    if mode != "auto":
        return mode
    why = pod_network_missing()
    if why is None:
        return "netns"
    print(
        f"raftkube: pods share the host's network (the pod network: {why}): two pods on one node cannot"
        " listen on one port, and Services have no proxy",
        file=sys.stderr,
    )
    return "host"


def dns_service_ip(service_cidr: str) -> str:
    net = ipaddress.ip_network(service_cidr, strict=True)
    return str(net.network_address + DNS_OFFSET)


def node_index(node: str) -> int:
    return int(node.removeprefix("node-"))


def pod_cidr(node: str) -> str:
    """node-<i>'s pods' addresses."""
    return f"10.244.{node_index(node)}.0/24"


def node_address(node: str) -> str:
    """node-<i>'s InternalIP on the pod network: its bridge's address."""
    return f"10.244.{node_index(node)}.1"


@dataclass(frozen=True)
class NetworkPlan:
    kubelets: KubeletSettings
    service_cidr: str
    # the service proxies and the cluster DNS server run (not beside the upstream kube-apiserver,
    # whose RBAC does not know our DNS server's identity)
    services: bool = True

    @property
    def pod_network(self) -> bool:
        return self.kubelets.pod_network == "netns" and self.kubelets.count > 0

    @property
    def dns_ip(self) -> str:
        return dns_service_ip(self.service_cidr)

    def kubelet_args(self, node: str) -> tuple[str, ...]:
        if not self.pod_network:
            return ()
        dns = ("--cluster-dns", self.dns_ip) if self.services else ()
        return (*self.kubelets.network_args(node), "--address", node_address(node), *dns)

    def proxies(self) -> tuple[str, ...]:
        """The nodes that get a service proxy."""
        return self.kubelets.nodes() if self.pod_network and self.services else ()

    def proxy_args(self, node: str) -> tuple[str, ...]:
        return ("--node-ip", node_address(node), "--cluster-cidr", CLUSTER_CIDR, "--pod-cidr", pod_cidr(node))

    def runs_dns(self) -> bool:
        """On the pod network only: on the host's, pods could not reach it at port 53 anyway
        (their resolv.conf is the node's)."""
        return self.services and self.pod_network

    def dns_args(self, port: int) -> tuple[str, ...]:
        address = f"{node_address(self.kubelets.nodes()[0])}:{port}"
        return ("--listen", address, "--advertise", address, "--service-ip", self.dns_ip)

    def prepare(self) -> None:
        """Forwarding on, once the pod network is in use (said when it changes)."""
        if not self.pod_network:
            return
        try:
            if FORWARDING.read_text().strip() != "1":
                FORWARDING.write_text("1\n")
                print("raftkube: net.ipv4.ip_forward set to 1 (pods of different nodes reach each other)")
        except OSError as e:
            print(f"raftkube: net.ipv4.ip_forward could not be set ({e}): nodes' pods cannot reach each other")
