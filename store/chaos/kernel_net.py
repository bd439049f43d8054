"""The network between members on hosts of their own (`hosts = "netns"`), faulted by the
kernel: the same control surface as ProxyMesh (network.py), made of nftables rules in each
member's network namespace, so faults hold with TLS on (the proxies had to read Raft frames).

A link i -> j is the TCP connection member i dials to j's peer port: it carries only i's
messages to j (store/server/transport.py).  Per member one table `inet rkchaos`:
* `out` (hook output) drops what the member sends on its blackholed links (to the peer's
  address and peer port), and a share of what it sends on its lossy ones (`numgen random`:
  TCP retransmits, so a share of packets lost is delay and stalls, not lost messages);
* `in` (hook input) drops new and live client connections to its client port while its
  clients are cut.
Each change re-renders the member's whole table in one `nft -f -` transaction (delete and
add), so a heal is exact and nothing half-applied is ever live.  Resets (`cut`, `cut_all`,
`cut_clients`) kill live sockets with `ss -K` in the namespace: the sender sees its
connection aborted and redials, as after a peer's RST.

Latency: the kernel cannot delay packets here (no tc netem, no nft `queue`), so a delayed
link goes through a proxy in the sender's namespace (store/chaos/delay_proxy.py): a third
chain of the table (`delayed`, nat, output hook) redirects the member's new connections to
the delayed peers to it; it holds what the member sends and passes it on, TLS unread.  Live
connections are reset so they redial through it; a heal removes the rule, then stops the
proxy, whose connections close and are redialled direct.
"""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from machinery.process import nft
from machinery.process.hosts import HostNetwork
from store.api.protocol import split_url
from store.chaos.delay_proxy import MARK, MAX_DELAY_S, Delay
from store.chaos.links import Link, LinkSelection, Target
from store.launcher import LocalCluster

TABLE = "rkchaos"
SS_TIMEOUT = 10.0


def fault_table(out: list[str], inbound: list[str], redirect: Sequence[str] = ()) -> str:
    """The nft script that replaces a namespace's whole fault table with these output and input
    drop rules and output redirects (none: the table is gone), in one transaction."""
    script = [f"table inet {TABLE}", f"delete table inet {TABLE}"]  # add first: delete never fails
    if out or inbound or redirect:
        script += [
            f"table inet {TABLE} {{",
            "  chain out { type filter hook output priority 0; policy accept;",
            *(f"    {r}" for r in out),
            "  }",
            "  chain in { type filter hook input priority 0; policy accept;",
            *(f"    {r}" for r in inbound),
            "  }",
            "  chain delayed { type nat hook output priority -100; policy accept;",
            *(f"    {r}" for r in redirect),
            "  }",
            "}",
        ]
    return "\n".join(script) + "\n"


class FaultUnavailable(Exception):
    """This kernel cannot make that fault (the message says what is missing)."""


@dataclass
class _Faults:
    """One member's faults, as rules of its table."""

    blackholed: set[int] = field(default_factory=set)
    """Peers its messages do not reach."""
    lossy: dict[int, float] = field(default_factory=dict)
    """Peer -> share of its packets to that peer dropped."""
    clients_cut: bool = False
    delayed: dict[int, Delay] = field(default_factory=dict)
    """Peer -> how late its messages to that peer arrive (through its delay proxy)."""


@dataclass
class _Proxy:
    process: subprocess.Popen[str]
    port: int


PROXY_START_S = 10.0


class KernelMesh(LinkSelection):
    def __init__(self, cluster: LocalCluster) -> None:
        net = cluster.host_network()
        if net is None:
            raise ValueError("KernelMesh needs members on hosts of their own (hosts = netns)")
        self.net: HostNetwork = net
        self.cluster = cluster
        members = cluster.members()
        self.ids = [m.id for m in members]
        self.address = {m.id: split_url(m.peer_url)[0] for m in members}
        self.peer_port = {m.id: split_url(m.peer_url)[1] for m in members}
        self.client_port = {m.id: split_url(m.client_url)[1] for m in members}
        self.clients: dict[int, str] = {}
        """Members whose clients go through something of ours: none here (the kernel needs no
        endpoint of its own), so ChaosCluster hands clients the members' own URLs."""
        self._faults = {m: _Faults() for m in self.ids}
        self._proxies: dict[int, _Proxy] = {}
        self._stats = {m: {"renders": 0, "resets": 0, "proxies": 0} for m in self.ids}

    def __enter__(self) -> KernelMesh:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    def _prefix(self, member: int) -> list[str]:
        return self.net.argv(self.cluster.host_name(member), [])

    def _render(self, member: int) -> None:
        f = self._faults[member]
        out, inbound = [], []
        for peer in sorted(f.blackholed):
            out.append(f"ip daddr {self.address[peer]} tcp dport {self.peer_port[peer]} drop")
        for peer, share in sorted(f.lossy.items()):
            if peer not in f.blackholed:
                per_10k = round(share * 10_000)
                out.append(
                    f"ip daddr {self.address[peer]} tcp dport {self.peer_port[peer]} "
                    f"numgen random mod 10000 < {per_10k} drop"
                )
        if f.clients_cut:
            inbound.append(f"tcp dport {self.client_port[member]} drop")
        proxy = self._proxies.get(member)
        redirect = [
            f"meta mark != {MARK:#x} ip daddr {self.address[peer]} tcp dport {self.peer_port[peer]}"
            f" redirect to :{proxy.port}"
            for peer in sorted(f.delayed)
            if proxy is not None
        ]
        nft.run(fault_table(out, inbound, redirect), prefix=self._prefix(member))
        self._stats[member]["renders"] += 1

    def _reset(self, member: int, *filters: str) -> None:
        """Abort the member's live TCP connections matching an `ss` filter."""
        argv = [*self._prefix(member), "ss", "-K", *filters]
        subprocess.run(argv, capture_output=True, timeout=SS_TIMEOUT, check=True)
        self._stats[member]["resets"] += 1

    def _blackhole(self, links: Sequence[Link]) -> None:
        touched = set()
        for src, dst in links:
            self._faults[src].blackholed.add(dst)
            touched.add(src)
        for m in sorted(touched):
            self._render(m)

    # ------------------------------------------------------------------ peer links
    def blackhole(self, src: int, dst: int) -> None:
        """src's messages to dst are lost; dst's to src still arrive."""
        self._blackhole(self._select((src, dst)))

    def one_way(self, src: int, dst: int) -> None:
        self.blackhole(src, dst)

    def blackhole_between(self, a: int, b: int) -> None:
        self._blackhole(self._between([a], [b]))

    def isolate(self, member: int) -> None:
        self._blackhole(self._select(member))

    def partition(self, groups: list[list[int]]) -> None:
        self._blackhole(self._partition(groups))

    def bridge(self, a: int | Sequence[int], bridge_member: int, b: int | Sequence[int]) -> None:
        self._blackhole(self._bridge(a, bridge_member, b))

    def cut(self, src: int, dst: int) -> None:
        """Abort src's live connection to dst; src redials."""
        self._check(src, dst)
        self._reset(src, "dst", self.address[dst], "dport", "=", str(self.peer_port[dst]))

    def cut_all(self, member: int) -> None:
        """Abort every peer connection from and to `member`."""
        self._check(member)
        port = str(self.peer_port[member])
        self._reset(member, "(", "sport", "=", port, "or", "dport", "=", port, ")")

    def delay(self, target: Target, mean_s: float, jitter_s: float = 0.0) -> None:
        """Messages on the link(s) arrive mean +- jitter seconds late, in order (through a delay
        proxy in the sender's namespace: this kernel cannot hold packets itself)."""
        if not 0 <= jitter_s <= mean_s <= MAX_DELAY_S:
            raise ValueError(f"delay: want 0 <= jitter <= mean <= {MAX_DELAY_S:g} s, got {mean_s}, {jitter_s}")
        touched = set()
        for src, dst in self._select(target):
            self._faults[src].delayed[dst] = Delay(mean_s, jitter_s)
            touched.add(src)
        for m in sorted(touched):
            self._redelay(m)

    def _redelay(self, member: int) -> None:
        """Put the member's delay proxy in line with its delayed links: a new proxy for the new
        set (its live connections to delayed peers reset, so they redial through it), or none."""
        delayed = self._faults[member].delayed
        old = self._proxies.pop(member, None)
        if delayed:
            self._proxies[member] = self._start_proxy(member, delayed)
            self._stats[member]["proxies"] += 1
        self._render(member)
        if old is not None:
            _stop(old.process)
        for peer in sorted(delayed):
            self._reset(member, "dst", self.address[peer], "dport", "=", str(self.peer_port[peer]))

    def _start_proxy(self, member: int, delayed: dict[int, Delay]) -> _Proxy:
        argv = [*self._prefix(member), sys.executable, "-m", "store.chaos.delay_proxy", "--mark", hex(MARK)]
        for peer, d in sorted(delayed.items()):
            argv += ["--delay", f"{self.address[peer]}:{self.peer_port[peer]}={d.mean_s}/{d.jitter_s}"]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert process.stdout is not None
        ready = _read_line(process.stdout, PROXY_START_S)
        if not ready.startswith("ready "):
            process.kill()
            _, err = process.communicate(timeout=5.0)
            raise FaultUnavailable(f"member {member}'s delay proxy did not start: {ready or err.strip()}")
        return _Proxy(process, int(ready.split()[1]))

    def drop(self, target: Target, share: float) -> None:
        """That share of the packets on the link(s) is lost (TCP resends them)."""
        if not 0 <= share <= 1:
            raise ValueError(f"share must be within [0, 1], got {share}")
        touched = set()
        for src, dst in self._select(target):
            self._faults[src].lossy[dst] = share
            touched.add(src)
        for m in sorted(touched):
            self._render(m)

    def heal_link(self, src: int, dst: int) -> None:
        self.heal_links([(src, dst)])

    def heal_links(self, links: Sequence[Link]) -> None:
        """Heal several links with one change per sender (a delay proxy is restarted or stopped
        once, not once per link)."""
        undelayed: set[int] = set()
        for src, dst in links:
            self._check(src, dst)
            self._faults[src].blackholed.discard(dst)
            self._faults[src].lossy.pop(dst, None)
            if self._faults[src].delayed.pop(dst, None) is not None:
                undelayed.add(src)
        for src in sorted({src for src, _ in links}):
            if src in undelayed:
                self._redelay(src)
            else:
                self._render(src)

    # ------------------------------------------------------------------ clients
    def client_url(self, member: int) -> str:
        self._check(member)
        return next(m.client_url for m in self.cluster.members() if m.id == member)

    def cut_clients(self, member: int) -> None:
        """Clients lose `member`: live connections aborted, new ones dropped until heal_clients."""
        self._check(member)
        self._faults[member].clients_cut = True
        self._render(member)
        self._reset(member, "sport", "=", str(self.client_port[member]))

    def heal_clients(self, member: int) -> None:
        self._check(member)
        if self._faults[member].clients_cut:
            self._faults[member].clients_cut = False
            self._render(member)

    # ------------------------------------------------------------------ all
    def heal(self) -> None:
        """Clear every fault, on peer links and clients."""
        for m in self.ids:
            f = self._faults[m]
            if f.blackholed or f.lossy or f.clients_cut or f.delayed:
                self._faults[m] = _Faults()
                self._redelay(m)

    def delay_proxies(self) -> dict[int, int]:
        """member -> the pid of its delay proxy, for the members that have one."""
        return {m: proxy.process.pid for m, proxy in self._proxies.items()}

    def stats(self) -> dict[str, dict[str, Any]]:
        return {f"member-{m}": dict(s) for m, s in self._stats.items()}

    def close(self) -> None:
        """Stop the delay proxies (the rules go with the hosts: LocalCluster.stop_all)."""
        for proxy in self._proxies.values():
            _stop(proxy.process)
        self._proxies.clear()


def _read_line(stream: IO[str], timeout: float) -> str:
    """The next line of a child's output, or "" when none comes within `timeout`."""
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline().strip() if ready else ""


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(5.0)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5.0)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
