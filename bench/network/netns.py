"""The private network the network benchmark runs in: namespaces it creates and deletes by name.

Nothing here touches the host's namespace: a "host" namespace of our own (`rkbn-<hex>-h`)
holds a bridge (10.250.0.1/24, its own ip_forward and bridge-nf-call-iptables, both per
namespace), and each "pod" is a namespace with a veth whose peer is a port of that bridge in
hairpin mode (as the kubelet sets it).  Every command is bounded in time; `Network.close()`
deletes every namespace it made (the veths and the bridge go with them).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import secrets
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

NAME_PREFIX = "rkbn-"
SUBNET = "10.250.0"
GATEWAY = f"{SUBNET}.1"
CLUSTER_CIDR = "10.250.0.0/16"
TIMEOUT_S = 10.0


def sh(argv: Sequence[str], *, check: bool = True, timeout: float = TIMEOUT_S) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def in_ns(ns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


@dataclass
class Network:
    """Namespaces named `rkbn-<hex>-<role>`; `host` has the bridge, `pods` maps a pod to its IP."""

    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    made: list[str] = field(default_factory=list)
    pods: dict[str, str] = field(default_factory=dict)

    def name(self, role: str) -> str:
        return f"{NAME_PREFIX}{self.tag}-{role}"

    @property
    def host(self) -> str:
        return self.name("h")

    def add_ns(self, role: str) -> str:
        ns = self.name(role)
        sh(["ip", "netns", "add", ns])
        self.made.append(ns)
        sh(in_ns(ns, "ip", "link", "set", "lo", "up"))
        return ns

    def make_host(self) -> None:
        """The host namespace: a bridge with the gateway address, forwarding on, and bridged
        frames through the IP hooks (br_netfilter, as kube-proxy needs)."""
        ns = self.add_ns("h")
        sh(in_ns(ns, "ip", "link", "add", "br0", "type", "bridge"))
        sh(in_ns(ns, "ip", "addr", "add", f"{GATEWAY}/24", "dev", "br0"))
        sh(in_ns(ns, "ip", "link", "set", "br0", "up"))
        sh(in_ns(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"))
        sh(in_ns(ns, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"))

    def add_pod(self, role: str, host_octet: int) -> str:
        """A pod namespace on the bridge: eth0 = SUBNET.host_octet/24, default via the gateway."""
        ns = self.add_ns(role)
        ip = f"{SUBNET}.{host_octet}"
        outer = f"v{self.tag}{role}"[:15]
        sh(in_ns(self.host, "ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns))
        sh(in_ns(self.host, "ip", "link", "set", outer, "master", "br0"))
        sh(in_ns(self.host, "ip", "link", "set", outer, "type", "bridge_slave", "hairpin", "on"))
        sh(in_ns(self.host, "ip", "link", "set", outer, "up"))
        sh(in_ns(ns, "ip", "addr", "add", f"{ip}/24", "dev", "eth0"))
        sh(in_ns(ns, "ip", "link", "set", "eth0", "up"))
        sh(in_ns(ns, "ip", "route", "add", "default", "via", GATEWAY))
        # many short connections from one client: the whole port range (this namespace's own)
        sh(in_ns(ns, "sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65000"))
        self.pods[role] = ip
        return ns

    def close(self) -> None:
        for ns in reversed(self.made):
            sh(["ip", "netns", "del", ns], check=False)
        self.made.clear()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def listen_in(ns: str, host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket made inside namespace `ns` (this thread goes back to its own
    namespace at once; the socket stays where it was made)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        _setns(target)
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
            s.listen(256)
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)
    return s
