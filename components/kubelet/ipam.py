"""A node's pod addresses: which pod holds which IP of the node's pod CIDR.

Pure: the allocator is a value the pod network (podnet.py) loads from and saves to a file
under the kubelet's root dir, so a restarted kubelet gives a running pod the address it has,
and a removed pod's address is free again.  The network address, the gateway (the first host
address, the bridge's) and the broadcast address are never handed out; addresses are given
lowest first.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

MAX_PREFIX = 30  # a /30 holds the gateway and one pod; smaller holds no pod


class IpamError(Exception):
    """No address to give, or a CIDR / saved state that cannot be used; the message says why."""


def parse_cidr(text: str) -> ipaddress.IPv4Network:
    """An IPv4 pod CIDR (host bits must be zero), with room for a gateway and a pod."""
    try:
        net = ipaddress.IPv4Network(text, strict=True)
    except ValueError as e:
        raise IpamError(f"{text!r} is not an IPv4 network in CIDR form (like 10.244.1.0/24): {e}") from None
    if net.prefixlen > MAX_PREFIX:
        raise IpamError(f"{text}: a pod CIDR needs a prefix of at most /{MAX_PREFIX} (a gateway and a pod)")
    return net


def gateway(net: ipaddress.IPv4Network) -> ipaddress.IPv4Address:
    """The bridge's address: the network's first host address."""
    return net.network_address + 1


@dataclass
class Allocator:
    net: ipaddress.IPv4Network
    held: dict[str, ipaddress.IPv4Address] = field(default_factory=dict)  # pod uid -> its address

    def allocate(self, uid: str) -> ipaddress.IPv4Address:
        """The pod's address: the one it holds, else the lowest free one (IpamError when full)."""
        if uid in self.held:
            return self.held[uid]
        taken = set(self.held.values())
        first, last = int(gateway(self.net)) + 1, int(self.net.broadcast_address) - 1
        for n in range(first, last + 1):
            address = ipaddress.IPv4Address(n)
            if address not in taken:
                self.held[uid] = address
                return address
        raise IpamError(f"pod CIDR {self.net} is full: all {last - first + 1} pod addresses are in use")

    def release(self, uid: str) -> ipaddress.IPv4Address | None:
        """Free the pod's address; the address it held, None when it held none."""
        return self.held.pop(uid, None)

    def to_json(self) -> dict[str, Any]:
        return {"cidr": str(self.net), "pods": {uid: str(ip) for uid, ip in sorted(self.held.items())}}

    @classmethod
    def from_json(cls, doc: Any, net: ipaddress.IPv4Network) -> Allocator:
        """The saved allocations for `net` (the CIDR the kubelet runs with now).  A saved state
        of another CIDR that still holds addresses is refused: those pods' addresses would be
        outside the node's network."""
        if doc is None:
            return cls(net)
        if not isinstance(doc, dict) or not isinstance(doc.get("pods", {}), dict):
            raise IpamError("the saved pod addresses are not a JSON object with a 'pods' object")
        pods: dict[str, Any] = doc.get("pods") or {}
        if pods and doc.get("cidr") != str(net):
            raise IpamError(
                f"pods still hold addresses of pod CIDR {doc.get('cidr')}, not {net}: "
                "stop them (`raftkube down`) before changing the CIDR"
            )
        held: dict[str, ipaddress.IPv4Address] = {}
        for uid, text in pods.items():
            try:
                address = ipaddress.IPv4Address(text)
            except ValueError:
                raise IpamError(f"the saved address of pod {uid!r} is not an IPv4 address: {text!r}") from None
            if address not in net or address in (net.network_address, gateway(net), net.broadcast_address):
                raise IpamError(f"the saved address {address} of pod {uid!r} is not a pod address of {net}")
            if address in held.values():
                raise IpamError(f"the saved address {address} is held by two pods")
            held[str(uid)] = address
        return cls(net, held)
