"""The network between the members of a LocalCluster, under the chaos harness's control.

`ProxyMesh` puts one LinkProxy on every ordered pair of members (i -> j carries only i's
messages to j, see store/server/transport.py) and one raw proxy in front of each member's
client port, and points every member's `peer_dial` at its proxies.  Build it after
`LocalCluster.create()` and before the members start (they read peer_dial at start).

The proxies run on one asyncio loop in a background thread; the control methods are plain
synchronous calls (the harness is synchronous), safe from any thread.  Blackholes add up
(`partition` after `isolate` keeps both) until `heal()`, which clears every fault.

    local = LocalCluster(data_dir)
    local.create(settings, ports=free_ports(3 * settings.members))
    mesh = ProxyMesh(local, seed=42)      # before start_all(): members read peer_dial at start
    local.start_all()
    mesh.isolate(leader); ...; mesh.heal()
    mesh.close()                          # after the members are stopped

Members added later (`member add`) are dialled directly: the mesh covers the initial ones.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from store.api.protocol import split_url
from store.chaos.links import Link, LinkSelection, Target
from store.chaos.proxy import LinkProxy
from store.launcher import LocalCluster

T = TypeVar("T")
CONTROL_TIMEOUT = 10.0
"""Seconds a control call may wait for the proxy loop (it never blocks for long)."""

"""A member (every link from and to it) or one directed link (src, dst)."""


class ProxyMesh(LinkSelection):
    def __init__(self, cluster: LocalCluster, seed: int = 0) -> None:
        """Start the proxies for every member of `cluster` and write each member's peer_dial."""
        self.cluster = cluster
        self.ids = cluster.member_ids()
        rng = random.Random(seed)
        self.links: dict[Link, LinkProxy] = {}
        self.clients: dict[int, LinkProxy] = {}
        for m in cluster.members():
            peer, client = split_url(m.peer_url), split_url(m.client_url)
            for src in self.ids:
                if src != m.id:
                    self.links[(src, m.id)] = LinkProxy(peer, seed=rng.getrandbits(64), name=f"{src}->{m.id}")
            self.clients[m.id] = LinkProxy(client, framed=False, seed=rng.getrandbits(64), name=f"client-{m.id}")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxy-mesh", daemon=True)
        self._thread.start()
        self._closed = False
        try:
            asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(CONTROL_TIMEOUT)
            for src in self.ids:
                dial = {dst: p.url for (s, dst), p in self.links.items() if s == src}
                cluster.set_peer_dial(src, dial)
        except BaseException:
            self.close()
            raise

    async def _start(self) -> None:
        # The members' ports were free when chosen but are not bound until they start:
        # a proxy must not take one of them (bind(0) may hand out a just-released port).
        reserved = {split_url(u)[1] for m in self.cluster.members() for u in (m.peer_url, m.client_url, m.http_url)}
        for p in self._all():
            for _ in range(50):
                await p.start()
                if p.port not in reserved:
                    break
                await p.close()
            else:
                raise RuntimeError("no free port for a proxy outside the cluster's own ports")

    def _all(self) -> list[LinkProxy]:
        return [*self.links.values(), *self.clients.values()]

    def __enter__(self) -> ProxyMesh:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    def _call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the proxy loop (proxies are not thread-safe) and return its result."""
        if self._closed:
            raise RuntimeError("the proxy mesh is closed")

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(CONTROL_TIMEOUT)

    def _each(self, links: Iterable[Link], action: Callable[[LinkProxy], None]) -> None:
        self._apply([self.links[link] for link in links], action)

    def _apply(self, proxies: list[LinkProxy], action: Callable[[LinkProxy], None]) -> None:
        def run() -> None:
            for p in proxies:
                action(p)

        self._call(run)

    # ------------------------------------------------------------------ peer links
    def peer_url(self, src: int, dst: int) -> str:
        """Where `src` dials `dst` (the proxy of that link)."""
        return self.links[(src, dst)].url

    def blackhole(self, src: int, dst: int) -> None:
        """src's messages to dst are lost; dst's to src still arrive."""
        self._each(self._select((src, dst)), LinkProxy.blackhole)

    def one_way(self, src: int, dst: int) -> None:
        """The one-way link failure: same as blackhole(src, dst), named for the scenario."""
        self.blackhole(src, dst)

    def blackhole_between(self, a: int, b: int) -> None:
        self._each(self._between([a], [b]), LinkProxy.blackhole)

    def isolate(self, member: int) -> None:
        """Nothing reaches `member` from its peers, nothing from it reaches them."""
        self._each(self._select(member), LinkProxy.blackhole)

    def partition(self, groups: list[list[int]]) -> None:
        """Members talk only within their group; a member in no group is alone."""
        self._each(self._partition(groups), LinkProxy.blackhole)

    def bridge(self, a: int | Sequence[int], bridge_member: int, b: int | Sequence[int]) -> None:
        """Sides a and b each talk to `bridge_member` (and within themselves) but not to each other."""
        self._each(self._bridge(a, bridge_member, b), LinkProxy.blackhole)

    def cut(self, src: int, dst: int) -> None:
        """Reset the live connection(s) of one link now; the sender reconnects."""
        self._each(self._select((src, dst)), LinkProxy.cut)

    def cut_all(self, member: int) -> None:
        """Reset every peer connection from and to `member` now."""
        self._each(self._select(member), LinkProxy.cut)

    def delay(self, target: Target, mean_s: float, jitter_s: float = 0.0) -> None:
        """Frames on the link(s) arrive mean +- jitter seconds late, in order."""
        self._each(self._select(target), lambda p: p.delay(mean_s, jitter_s))

    def drop(self, target: Target, share: float) -> None:
        """That share of frames on the link(s) is lost (seeded per link)."""
        self._each(self._select(target), lambda p: p.drop(share))

    def heal_link(self, src: int, dst: int) -> None:
        self._each(self._select((src, dst)), LinkProxy.heal)

    # ------------------------------------------------------------------ clients
    def client_url(self, member: int) -> str:
        """The member's client endpoint through its proxy (what cut_clients acts on)."""
        self._check(member)
        return self.clients[member].url

    def cut_clients(self, member: int) -> None:
        """Clients on the proxied endpoint lose `member`: live connections are reset and
        new ones hang (blackholed) until heal_clients."""
        self._check(member)
        p = self.clients[member]

        def act() -> None:
            p.blackhole()
            p.cut()

        self._call(act)

    def heal_clients(self, member: int) -> None:
        self._check(member)
        self._call(self.clients[member].heal)

    # ------------------------------------------------------------------ all
    def heal(self) -> None:
        """Clear every fault on every peer link and client proxy."""
        self._apply(self._all(), LinkProxy.heal)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per proxy ("1->2", "client-1"): counters and current faults."""
        proxies = self._all()
        return self._call(lambda: {p.name: p.report() for p in proxies})

    def close(self) -> None:
        """Stop every proxy and the loop thread.  Members keep their peer_dial: start them
        again only under a new mesh (or after LocalCluster.set_peer_dial(id, {}))."""
        if self._closed:
            return
        self._closed = True
        if self._loop.is_running():
            proxies = self._all()

            async def stop() -> None:
                for p in proxies:
                    await p.close()
                # Connection handlers end once their sockets are closed; give them a moment.
                rest = asyncio.all_tasks() - {asyncio.current_task()}
                for t in rest:
                    t.cancel()
                if rest:
                    await asyncio.wait(rest, timeout=2.0)

            try:
                asyncio.run_coroutine_threadsafe(stop(), self._loop).result(CONTROL_TIMEOUT)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(CONTROL_TIMEOUT)
        if not self._thread.is_alive():
            self._loop.close()
