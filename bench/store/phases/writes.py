"""Sustained write throughput and latency at 1, 16, 64 and 256 requests in flight.

All systems run at once (idle when not measured) and the levels are interleaved, so that
a neighbour's load on the shared machine hits every system alike.  256-byte values over a
key space of `keyspace` keys; writers talk to the leader.
"""

from __future__ import annotations

import contextlib
from typing import Any

from bench.store.context import Context
from bench.store.peers import Peer


def run(ctx: Context) -> dict[str, Any]:
    ctx.progress.start("writes")
    out: dict[str, list[dict[str, Any]]] = {s: [] for s in ctx.systems}
    with contextlib.ExitStack() as stack:
        peers: dict[str, Peer] = {s: stack.enter_context(ctx.cluster(s, "writes")) for s in ctx.systems}
        for level in ctx.sizes.write_levels:
            for system, peer in peers.items():
                leader = peer.leader()
                r = ctx.closed_loop(
                    peer,
                    "write",
                    level,
                    ctx.sizes.write_s,
                    ctx.write_endpoints(peer, leader),
                    f"{system} {level} in flight",
                    prefix="/bench/w/",
                )
                out[system].append(r)
                ctx.progress.update(
                    f"{system} {level} in flight: {r['ops_per_s']:,.0f} writes/s p99 {r['p99_ms']:.1f} ms"
                )
    ctx.progress.end("done")
    return {"value_size": ctx.sizes.value_size, "seconds": ctx.sizes.write_s, "systems": out}
