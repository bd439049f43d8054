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

Decisions: a single apiserver stays on this machine's loopback, where a component in a
namespace cannot reach it, so the components stay too; the balancer, the kubelets with the pod
network (it is made in this machine's namespace), the service proxies and the DNS server stay
on this machine.  Components on hosts dial the apiservers' LAN addresses (the kubeconfig's
`raftkube.io/apiservers`), never the balancer.
"""

from __future__ import annotations

from pathlib import Path

from components.cli.apiserver_set import ApiserverSet
from components.cli.launcher import MOVABLE, REPLICA, OnHost
from machinery.process.hosts import HostsError
from machinery.process.launch import LauncherError

HOSTS = {"controller-manager": ("c", 30), "scheduler": ("s", 40), "hollow-nodes": ("k", 50)}
"""A movable component's host letter and the offset of its hosts' addresses on the LAN."""
assert set(HOSTS) == set(MOVABLE)


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
