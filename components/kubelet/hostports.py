"""Host ports on the pod network: a container port with `hostPort` answers on the node's
address (or the `hostIP` it names), forwarded into the pod's namespace, as the CNI portmap
plugin does for kube's runtimes.

One nftables table per node, `ip rk-hostports-<hash of the node>`, rendered from the running
pods that ask for host ports and applied whole in one `nft` transaction when it changes
(`HostPorts.sync`): a DNAT per (address, protocol, port) in the prerouting hook (traffic from
pods and other hosts) and the output hook (the node's own processes, hostNetwork pods among
them), at priority -101: just before the service proxy's DNAT (dstnat, -100), as portmap's
chains run before kube-proxy's.  `hostIP` unset or 0.0.0.0 means the node's address — every "node" of a local cluster
shares one kernel, so "any local address" would take the port on every node.  A `hostIP` of
127.0.0.1 is reached from the node itself: the bridge routes loopback-sourced packets
(route_localnet) and they are masqueraded, so the pod can answer, as portmap does.

Pure rendering (`render`) from validated values; applying goes through machinery.process.nft.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from machinery.objects import Obj
from machinery.process import nft

log = logging.getLogger("raftkube.kubelet")

TABLE_PREFIX = "rk-hostports-"
PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}
LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")


def table_name(node: str) -> str:
    return TABLE_PREFIX + hashlib.sha256(node.encode()).hexdigest()[:10]


@dataclass(frozen=True, order=True)
class Mapping:
    address: ipaddress.IPv4Address  # where it answers
    protocol: str  # tcp, udp, sctp
    host_port: int
    pod_ip: ipaddress.IPv4Address
    container_port: int


def mappings_of(pod: Obj, pod_ip: str, node_ip: str) -> list[Mapping]:
    """The pod's host ports (malformed ones left out: the apiserver validated them once)."""
    out: list[Mapping] = []
    try:
        target = ipaddress.IPv4Address(pod_ip)
        node = ipaddress.IPv4Address(node_ip)
    except ValueError:
        return out
    containers = (pod.get("spec") or {}).get("containers")
    for container in containers if isinstance(containers, list) else ():
        ports = container.get("ports") if isinstance(container, dict) else None
        for port in ports if isinstance(ports, list) else ():
            if not isinstance(port, dict):
                continue
            host_port, container_port = port.get("hostPort"), port.get("containerPort")
            protocol = PROTOCOLS.get(str(port.get("protocol") or "TCP"))
            if not isinstance(host_port, int) or not isinstance(container_port, int) or protocol is None:
                continue
            if not _port(host_port) or not _port(container_port):
                continue
            host_ip = str(port.get("hostIP") or "0.0.0.0")
            try:
                address = ipaddress.IPv4Address(host_ip)
            except ValueError:
                continue
            out.append(
                Mapping(node if address.is_unspecified else address, protocol, host_port, target, container_port)
            )
    return out


def _port(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def render(node: str, mappings: Iterable[Mapping]) -> str:
    """The node's whole table, deterministic."""
    table = table_name(node)
    rules = [
        f"ip daddr {m.address} {m.protocol} dport {m.host_port} dnat to {m.pod_ip}:{m.container_port}"
        for m in sorted(set(mappings))
    ]
    lines = [
        f"table ip {table} {{",
        "  chain hostports {",
        *(f"    {r}" for r in rules),
        "  }",
        "  chain prerouting {",
        "    type nat hook prerouting priority -101; policy accept;",
        "    fib daddr type local jump hostports",
        "  }",
        "  chain output {",
        "    type nat hook output priority -101; policy accept;",
        "    fib daddr type local jump hostports",
        "  }",
        "  chain postrouting {",
        "    type nat hook postrouting priority 99; policy accept;",
        f"    ip saddr {LOOPBACK} ct status dnat masquerade",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


class HostPorts:
    """One node's table, applied when what it should hold changes."""

    def __init__(self, node: str, node_ip: str, bridge: str) -> None:
        self.node = node
        self.node_ip = node_ip
        self.bridge = bridge
        self._applied: str | None = None

    def sync(self, pods: Iterable[tuple[Obj, str]]) -> None:
        """`pods`: (pod, its IP) of every running pod on the pod network.  Errors are logged
        (and tried again at the next sync)."""
        mappings = [m for pod, ip in pods for m in mappings_of(pod, ip, self.node_ip)]
        if not mappings and self._applied is None:
            return  # never needed: no table at all
        text = render(self.node, mappings)
        if text == self._applied:
            return
        if any(m.address in LOOPBACK for m in mappings):
            _route_localnet(self.bridge)
        table = table_name(self.node)
        try:
            nft.run(f"add table ip {table}\ndelete table ip {table}\n{text}")
        except nft.NftError as e:
            log.warning("host ports of %s not applied: %s", self.node, e)
            self._applied = None
            return
        self._applied = text


def _route_localnet(bridge: str) -> None:
    path = Path(f"/proc/sys/net/ipv4/conf/{bridge}/route_localnet")
    try:
        if path.read_text().strip() != "1":
            path.write_text("1\n")
    except OSError as e:
        log.warning("route_localnet on %s not set (127.0.0.1 host ports will not answer): %s", bridge, e)


def remove(node: str) -> None:
    """The node's table gone (`raftkube down`); no error when there is none or no nft."""
    table = table_name(node)
    try:
        nft.run(f"add table ip {table}\ndelete table ip {table}\n")
    except nft.NftError as e:
        if "cannot run nft" not in str(e):
            raise
