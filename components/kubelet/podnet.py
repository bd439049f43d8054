"""`--pod-network netns`: each pod in a network namespace of its own, on the node's bridge.

Per node a Linux bridge (`bridge_name`) holds the gateway, the first address of the node's
pod CIDR, so the host reaches every pod directly (probes and port-forward dial the pod's IP).
Per pod a network namespace made with `ip netns add` (the file /run/netns/<name>, which the
shim joins with setns) and a veth pair: the host end on the bridge, the other end `eth0` in
the pod's namespace with the pod's address (ipam.py), `lo` up and a default route via the
gateway.  Everything is driven through iproute2's `ip`; its errors become PodNetError with
its words.

Lifetimes: the namespace file and the bridge outlive the kubelet (a restarted kubelet
re-adopts a running pod's network: the same namespace, the same address, saved in
<root>/podnet.json); a pod's network goes when the pod is removed (`teardown`); the bridge
and any pod namespace left go with `teardown_all` (`raftkube down`, via
ProcessRuntime.stop_all), with the node's host ports table (hostports.py).
net.ipv4.ip_forward is left as the host has it (`raftkube up` turns it on): pods reach their
own node's pods and the host without it; pods of another node on this machine only with it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from components.kubelet import hostports, ipam
from machinery.process import iproute

NETNS_DIR = Path("/run/netns")
STATE_FILE = "podnet.json"
POD_IFACE = "eth0"
IFNAMSIZ = iproute.IFNAMSIZ

RunIp = Callable[[list[str]], str]


class PodNetError(Exception):
    """The pod network could not be set up or torn down; the message says why."""


# -- names (pure) -------------------------------------------------------------------------------


def _digest(text: str, n: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def bridge_name(node: str) -> str:
    """The node's bridge: `rk-` and a hash of the node name (any node name fits in 15 chars)."""
    return f"rk-{_digest(node, 10)}"


def netns_prefix(node: str) -> str:
    """What every pod namespace of the node is named with (to find them all for teardown)."""
    return f"rk-{_digest(node, 10)}-"


def netns_name(node: str, uid: str) -> str:
    """The pod's namespace under /run/netns: stable for (node, pod uid), so a restarted kubelet
    finds it again."""
    return netns_prefix(node) + _digest(uid, 16)


def veth_name(node: str, uid: str) -> str:
    """The host end of the pod's veth pair: unique on the host across nodes, 15 chars."""
    return f"rkv{_digest(f'{node}/{uid}', IFNAMSIZ - 3)}"


# -- running `ip` -------------------------------------------------------------------------------


def run_ip(args: list[str]) -> str:
    """`ip ARGS`: its output, or PodNetError with the command and what `ip` said."""
    try:
        return iproute.run_ip(args)
    except iproute.IpCommandError as e:
        raise PodNetError(f"the pod network: {e}") from None


link_exists = iproute.link_exists


def forwarding_enabled() -> bool:
    """net.ipv4.ip_forward: without it pods of another node on this machine are not reachable."""
    try:
        return Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() == "1"
    except OSError:
        return False


# -- the node's network -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodAddress:
    ip: str
    netns: str  # the namespace file the pod's containers join


def _read_state(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as e:
        raise PodNetError(f"{path}: cannot read the saved pod addresses: {e}") from None


class PodNetwork:
    """One node's pod network, its state under the kubelet's root dir."""

    def __init__(self, root: Path, node: str, cidr: str, run: RunIp = run_ip) -> None:
        self.net = ipam.parse_cidr(cidr)  # IpamError for a bad CIDR
        self.root = root
        self.node = node
        self.bridge = bridge_name(node)
        self.gateway = ipam.gateway(self.net)
        self.run = run
        self._bridge_ready = False
        # setup and teardown run in worker threads (asyncio.to_thread), several at once: each
        # loads, changes and saves the address state, so two interleaved would lose one's
        # change (a pod's address freed while its namespace still holds it, then handed to
        # another pod: two namespaces with one address).  One at a time per node.
        self._lock = threading.Lock()

    @property
    def state_path(self) -> Path:
        return self.root / STATE_FILE

    def _load(self) -> ipam.Allocator:
        try:
            return ipam.Allocator.from_json(_read_state(self.state_path), self.net)
        except ipam.IpamError as e:
            raise PodNetError(f"{self.state_path}: {e}") from None

    def _save(self, allocator: ipam.Allocator) -> None:
        doc = {"node": self.node, "bridge": self.bridge, **allocator.to_json()}
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        os.replace(tmp, self.state_path)  # a crash leaves the old state or the new, never half

    def held(self) -> dict[str, str]:
        """Pod uid -> its address, as saved."""
        return {uid: str(ip) for uid, ip in self._load().held.items()}

    def ensure_bridge(self) -> None:
        """The node's bridge, up, with the gateway address (made once, kept across restarts).
        The state file is written before the bridge is made, so that `teardown_all` finds and
        removes a bridge even when no pod ever ran on it (the kubelet makes it at its start):
        left behind, its gateway address would shadow the same node's CIDR on another cluster's
        host (its DNS server at 10.244.1.1 unreachable from pods of other nodes)."""
        with self._lock:
            self._ensure_bridge()

    def _ensure_bridge(self) -> None:
        if self._bridge_ready and link_exists(self.bridge):
            return
        if not self.state_path.exists():
            self._save(self._load())
        if not link_exists(self.bridge):
            self.run(["link", "add", "name", self.bridge, "type", "bridge"])
        address = f"{self.gateway}/{self.net.prefixlen}"
        if f" {address} " not in self.run(["-o", "-4", "addr", "show", "dev", self.bridge]):
            self.run(["addr", "add", address, "dev", self.bridge])
        self.run(["link", "set", self.bridge, "up"])
        self._bridge_ready = True

    def setup(self, uid: str) -> PodAddress:
        """The pod's network: the one it has (a restarted kubelet adopts it), else a new one."""
        with self._lock:
            return self._setup(uid)

    def _setup(self, uid: str) -> PodAddress:
        self._ensure_bridge()
        allocator = self._load()
        try:
            ip = allocator.allocate(uid)
        except ipam.IpamError as e:
            raise PodNetError(str(e)) from None
        self._save(allocator)  # before anything is made: teardown finds whatever was
        ns = netns_name(self.node, uid)
        address = PodAddress(str(ip), str(NETNS_DIR / ns))
        if self._configured(ns, ip, veth_name(self.node, uid)):
            return address
        if not (NETNS_DIR / ns).exists():
            self.run(["netns", "add", ns])
        self._wire(ns, ip, veth_name(self.node, uid))
        return address

    def _configured(self, ns: str, ip: ipaddress.IPv4Address, veth: str) -> bool:
        if not (NETNS_DIR / ns).exists() or not link_exists(veth):
            return False
        try:
            shown = self.run(["-n", ns, "-o", "-4", "addr", "show", "dev", POD_IFACE])
        except PodNetError:
            return False
        return f" {ip}/{self.net.prefixlen} " in shown

    def _wire(self, ns: str, ip: ipaddress.IPv4Address, veth: str) -> None:
        """The veth pair into the namespace, addressed and routed (over what a failed earlier
        attempt left)."""
        _delete_link(self.run, veth)  # its peer, a half-made eth0, goes with it
        self.run(["link", "add", veth, "type", "veth", "peer", "name", POD_IFACE, "netns", ns])
        self.run(["link", "set", veth, "master", self.bridge, "up"])
        # hairpin: a pod reaching its own Service may be sent back to itself, out of the port it
        # came in on (kube's --hairpin-mode=hairpin-veth)
        self.run(["link", "set", veth, "type", "bridge_slave", "hairpin", "on"])
        self.run(["-n", ns, "addr", "add", f"{ip}/{self.net.prefixlen}", "dev", POD_IFACE])
        self.run(["-n", ns, "link", "set", "lo", "up"])
        self.run(["-n", ns, "link", "set", POD_IFACE, "up"])
        self.run(["-n", ns, "route", "add", "default", "via", str(self.gateway)])

    def pod_uids(self) -> list[str]:
        """The pods that hold an address here (to find those no longer bound to the node)."""
        with self._lock:
            return sorted(self._load().held)

    def teardown(self, uid: str) -> None:
        """The pod is gone: its namespace and veth pair removed, its address free."""
        with self._lock:
            _remove_pod_network(self.run, self.node, uid)
            allocator = self._load()
            if allocator.release(uid) is not None:
                self._save(allocator)


def _remove_pod_network(run: RunIp, node: str, uid: str) -> None:
    ns, veth = netns_name(node, uid), veth_name(node, uid)
    if (NETNS_DIR / ns).exists():
        run(["netns", "del", ns])
    _delete_link(run, veth)  # gone with the namespace, unless a process still holds that


def _delete_link(run: RunIp, name: str) -> None:
    """Delete an interface if it is there (one going away with its namespace may vanish while
    we look: that is done, not an error)."""
    if not link_exists(name):
        return
    try:
        run(["link", "del", name])
    except PodNetError:
        if link_exists(name):
            raise


def teardown_all(root: Path, run: RunIp = run_ip) -> int:
    """Every pod network of the kubelet whose root dir is `root`, and its bridge, removed (for
    `raftkube down`, once the containers have stopped).  How many pod namespaces there were."""
    path = root / STATE_FILE
    doc = _read_state(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("node"), str):
        return 0
    node = doc["node"]
    pods = doc.get("pods") if isinstance(doc.get("pods"), dict) else {}
    for uid in pods or {}:
        _remove_pod_network(run, node, str(uid))
    prefix = netns_prefix(node)
    left = sorted(p.name for p in NETNS_DIR.glob(prefix + "*")) if NETNS_DIR.is_dir() else []
    for ns in left:  # one made while its address was not saved (a crash in between)
        run(["netns", "del", ns])
    bridge = bridge_name(node)
    _delete_link(run, bridge)
    try:
        hostports.remove(node)
    except Exception as e:
        raise PodNetError(f"the host ports table of {node}: {e}") from None
    path.unlink(missing_ok=True)
    return len(pods or {}) + len(left)
