"""Read throughput: linearizable and serializable reads at `read_concurrency` in flight.

Reads go to the leader for every system.  pysyncobj has no linearizable read: its figure
is a local read of the leader node's dict, labelled as such.
"""

from __future__ import annotations

import contextlib
from typing import Any

from bench.store.context import Context
from bench.store.peers import Peer

KEYS = 1000


def run(ctx: Context) -> dict[str, Any]:
    ctx.progress.start("reads")
    out: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in ctx.systems}
    with contextlib.ExitStack() as stack:
        peers: dict[str, Peer] = {s: stack.enter_context(ctx.cluster(s, "reads")) for s in ctx.systems}
        for system, peer in peers.items():
            leader = peer.leader()
            ctx.fill(peer, ctx.write_endpoints(peer, leader), "/bench/r/", KEYS, ctx.sizes.value_size, system)
        kinds = ("linearizable", "serializable")
        for kind in kinds:
            for system, peer in peers.items():
                if system == "pysyncobj" and kind == "linearizable":
                    continue
                label = "local" if system == "pysyncobj" else kind
                leader = peer.leader()
                r = ctx.closed_loop(
                    peer,
                    "read",
                    ctx.sizes.read_concurrency,
                    ctx.sizes.read_s,
                    [peer.endpoint(leader)],
                    f"{system} {label} reads",
                    prefix="/bench/r/",
                    keyspace=KEYS,
                    serializable=kind == "serializable",
                )
                r["kind"] = label
                out[system][label] = r
                ctx.progress.update(f"{system} {label}: {r['ops_per_s']:,.0f} reads/s")
    ctx.progress.end("done")
    return {"concurrency": ctx.sizes.read_concurrency, "seconds": ctx.sizes.read_s, "systems": out}
