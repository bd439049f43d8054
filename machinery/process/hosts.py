"""Hosts of their own on one machine (`--hosts netns`): each part in a network namespace with
its own address on one bridge, as machines on one LAN would be.

Why: with every part on 127.0.0.1 and port offsets, nothing shows parts on different hosts
(certificates naming the right address, clients reaching a member by its address), and faults
can only come from proxies in the path, which TLS blinds.  In namespaces the kernel carries
the traffic, so faults come from the kernel (nft rules in a host's namespace: drops, one-way
loss, resets; a link set down) with TLS on.

Layout for a network tagged `tag` (a cluster's data dir, hashed: two clusters never share):
* a bridge `rkh<hash>` in the root namespace holding the subnet's first address, so that the
  user's tools (etcdctl, kubectl, our CLI) on the machine reach every host directly;
* per host a namespace `rkh-<hash>-<host>` (a file under /run/netns) with `lo` up, `eth0` (one
  end of a veth pair whose other end is on the bridge) holding the host's address, and a
  default route through the bridge;
* processes are started in a host's namespace with `ip netns exec` (which execs: the pid is the
  process's own), a node's parts with `nsenter --net` (the machine's mounts: argv_sharing_mounts);
* a node host forwards (`forward`) and this machine routes its pods' CIDR to it (`route`).

Namespaces and links outlive the processes in them; `remove_all` takes every one of the tag
away (`down`).  Root only: making namespaces needs CAP_SYS_ADMIN.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import random
import subprocess
import uuid
from pathlib import Path

from machinery.process.iproute import IFNAMSIZ, IpCommandError, RunIp, link_exists, run_ip

NETNS_DIR = Path("/run/netns")
HOST_IFACE = "eth0"
DEFAULT_SUBNET = "10.77.0.0/24"


POD_NETWORK = ipaddress.IPv4Network("10.244.0.0/16")
"""The cluster's pod CIDR (components.cli.cluster_network.CLUSTER_CIDR): node-<i>'s pods get
10.244.<i>.0/24 only once its kubelet runs, so no route shows it yet when a subnet is chosen."""


def free_subnet() -> str:
    """A /24 of 10.200-254.x.0 that no route or address of this machine overlaps, nor the pod
    network: for a network of hosts (or pods) made beside others, by tests and chaos runs.  (A
    hosts' LAN at 10.244.1.0/24 would put this machine at node-1's gateway address.)"""
    argv = ["ip", "-4", "route", "show", "table", "all"]
    used = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True)
    taken = [POD_NETWORK, *(n for w in used.stdout.split() if (n := _network(w)) is not None)]
    rng = random.Random(uuid.uuid4().int)
    for _ in range(200):
        net = ipaddress.IPv4Network(f"10.{rng.randint(200, 254)}.{rng.randint(0, 255)}.0/24")
        if not any(net.overlaps(t) for t in taken):
            return str(net)
    raise HostsError("no free /24 in 10.200.0.0-10.254.255.0 (every one overlaps a route here)")


def _network(word: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(word, strict=False)
    except ValueError:
        return None


class HostsError(Exception):
    """The hosts' network could not be made or removed; the message says why."""


def _digest(text: str, n: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def can_make_hosts() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "hosts of their own (network namespaces) need root"
    return None


class HostNetwork:
    """The hosts of one cluster: names, addresses, and making or removing them."""

    def __init__(self, tag: str, subnet: str = DEFAULT_SUBNET, run: RunIp = run_ip) -> None:
        try:
            self.subnet = ipaddress.IPv4Network(subnet)
        except ValueError as e:
            raise HostsError(f"hosts subnet {subnet!r}: {e}") from None
        if self.subnet.num_addresses < 8:
            raise HostsError(f"hosts subnet {subnet}: too small (a /29 at least)")
        self.tag = tag
        self.key = _digest(tag, 8)
        self.bridge = f"rkh{self.key}"
        self.gateway = self.subnet.network_address + 1
        """The bridge's address: where the root namespace (the user's tools) sits on the LAN."""
        self.run = run

    # -- names (pure) ---------------------------------------------------------------------
    def netns(self, host: str) -> str:
        return f"rkh-{self.key}-{host}"

    def veth(self, host: str) -> str:
        """The root namespace's end of the host's veth pair."""
        return f"rkhv{_digest(f'{self.tag}/{host}', IFNAMSIZ - 4)}"

    def address(self, index: int) -> ipaddress.IPv4Address:
        """The `index`-th host's address (from 1): the subnet's 11th, 12th, ... (the first ten
        are left to the bridge and to whatever the user puts there)."""
        addr = self.subnet.network_address + 10 + index
        if addr not in self.subnet or addr == self.subnet.broadcast_address:
            raise HostsError(f"hosts subnet {self.subnet}: no address for host {index}")
        return addr

    def argv(self, host: str, argv: list[str]) -> list[str]:
        """`argv` run in the host's namespace."""
        return ["ip", "netns", "exec", self.netns(host), *argv]

    def argv_sharing_mounts(self, host: str, argv: list[str]) -> list[str]:
        """`argv` run in the host's network namespace and nothing else of it: with this
        machine's mounts, where `ip netns exec` gives a private mount namespace with /sys
        remounted.  For a node's parts: a kubelet needs the cgroup2 hierarchy under /sys, and
        the mounts it makes (pod network namespaces under /run/netns, memory volumes) must be
        the machine's, which `raftkube down` and the next kubelet see.  Execs, as `argv` does."""
        return ["nsenter", f"--net={self.netns_path(host)}", "--", *argv]

    def netns_path(self, host: str) -> Path:
        return NETNS_DIR / self.netns(host)

    # -- making and removing ---------------------------------------------------------------
    def ensure(self, host: str, address: str) -> None:
        """The host exists, up, at `address` (made, or fixed over what a failed attempt left)."""
        why = can_make_hosts()
        if why is not None:
            raise HostsError(why)
        try:
            self._ensure_bridge()
            ns, veth = self.netns(host), self.veth(host)
            if self._configured(ns, veth, address):
                return
            if not self.netns_path(host).exists():
                self.run(["netns", "add", ns])
            self._delete_link(veth)
            self.run(["link", "add", veth, "type", "veth", "peer", "name", HOST_IFACE, "netns", ns])
            self.run(["link", "set", veth, "master", self.bridge, "up"])
            self.run(["-n", ns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", HOST_IFACE])
            self.run(["-n", ns, "link", "set", "lo", "up"])
            self.run(["-n", ns, "link", "set", HOST_IFACE, "up"])
            self.run(["-n", ns, "route", "add", "default", "via", str(self.gateway)])
        except IpCommandError as e:
            raise HostsError(f"host {host} ({address}): {e}") from None

    def _ensure_bridge(self) -> None:
        if not link_exists(self.bridge):
            self.run(["link", "add", "name", self.bridge, "type", "bridge"])
        cidr = f"{self.gateway}/{self.subnet.prefixlen}"
        if f" {cidr} " not in self.run(["-o", "-4", "addr", "show", "dev", self.bridge]):
            self.run(["addr", "add", cidr, "dev", self.bridge])
        self.run(["link", "set", self.bridge, "up"])

    def _configured(self, ns: str, veth: str, address: str) -> bool:
        if not (NETNS_DIR / ns).exists() or not link_exists(veth):
            return False
        try:
            shown = self.run(["-n", ns, "-o", "-4", "addr", "show", "dev", HOST_IFACE])
        except IpCommandError:
            return False
        return f" {address}/{self.subnet.prefixlen} " in shown

    def forward(self, host: str) -> None:
        """net.ipv4.ip_forward on in the host (a new namespace starts with it off): a node host
        forwards between its pods' bridge and the LAN."""
        argv = self.argv_sharing_mounts(host, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        if done.returncode != 0:
            raise HostsError(f"host {host}: net.ipv4.ip_forward: {done.stderr.strip() or done.returncode}")

    def route(self, cidr: str, host: str, address: str) -> None:
        """This machine's packets for `cidr` (a node's pods) go to the host at `address`; the
        route leaves with the bridge (`remove_all`)."""
        try:
            self.run(["route", "replace", cidr, "via", address, "dev", self.bridge])
        except IpCommandError as e:
            raise HostsError(f"host {host}: the route to {cidr}: {e}") from None

    def set_link(self, host: str, up: bool) -> None:
        """The host's cable plugged in or pulled (its veth's root end up or down)."""
        try:
            self.run(["link", "set", self.veth(host), "up" if up else "down"])
        except IpCommandError as e:
            raise HostsError(f"host {host}: {e}") from None

    def hosts(self) -> list[str]:
        """The hosts of this network that exist now."""
        prefix = f"rkh-{self.key}-"
        if not NETNS_DIR.is_dir():
            return []
        return sorted(p.name[len(prefix) :] for p in NETNS_DIR.glob(prefix + "*"))

    def remove_all(self) -> int:
        """Every host of this network and its bridge gone; how many hosts there were.  Processes
        still running in a namespace keep it alive (the kernel frees it once they exit)."""
        hosts = self.hosts()
        try:
            for host in hosts:
                self.run(["netns", "del", self.netns(host)])
                self._delete_link(self.veth(host))  # goes with the namespace, unless held
            self._delete_link(self.bridge)
        except IpCommandError as e:
            raise HostsError(f"removing the hosts of {self.tag}: {e}") from None
        return len(hosts)

    def _delete_link(self, name: str) -> None:
        """`name` gone: deleted, or gone meanwhile (a veth leaves with its peer's namespace,
        asynchronously: it may vanish between the look and the delete)."""
        if not link_exists(name):
            return
        try:
            self.run(["link", "del", name])
        except IpCommandError:
            if link_exists(name):
                raise
