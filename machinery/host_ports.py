"""Host ports: which a pod asks for, and when two ask for the same one.

A container port with `hostPort` takes that port on the node (on `hostIP`, 0.0.0.0 meaning
every address) for its protocol.  Two such ports collide when port and protocol are the same
and their host IPs are equal or either is 0.0.0.0 — the rule kube's scheduler (the NodePorts
filter) and kubelet (its admission of a pod bound by name) both apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

HostPort = tuple[str, str, int]  # (hostIP, protocol, port)
ANY = "0.0.0.0"
NO_FREE_PORTS = "node(s) didn't have free ports for the requested pod ports"  # kube's NodePorts words


def host_ports(pod: Mapping[str, Any], shared_network: bool = False) -> list[HostPort]:
    """(hostIP, protocol, hostPort) of every container port of the pod that asks for a host port.
    `shared_network`: the pod runs in the node's network (a node without a pod network), where
    every containerPort is one of the node's ports, as a hostNetwork pod's are in kube (its
    hostPort defaults to its containerPort)."""
    out: list[HostPort] = []
    for c in (pod.get("spec") or {}).get("containers") or ():
        if not isinstance(c, Mapping):
            continue
        for p in c.get("ports") or ():
            if not isinstance(p, Mapping):
                continue
            hp = p.get("hostPort")
            if shared_network and not _port(hp):
                hp = p.get("containerPort")
            if isinstance(hp, int) and _port(hp):
                out.append((str(p.get("hostIP") or ANY), str(p.get("protocol") or "TCP"), hp))
    return out


def _port(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def collides(a: HostPort, b: HostPort) -> bool:
    return a[2] == b[2] and a[1] == b[1] and (a[0] == b[0] or ANY in (a[0], b[0]))


def first_collision(wanted: Iterable[HostPort], used: Iterable[HostPort]) -> HostPort | None:
    """A port of `wanted` some port of `used` already holds, None when all are free."""
    taken = list(used)
    return next((w for w in wanted if any(collides(w, u) for u in taken)), None)
