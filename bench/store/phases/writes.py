"""Sustained write throughput and latency at 1, 16, 64 and 256 requests in flight.

All systems run at once (idle when not measured) and the levels are interleaved, so that
a neighbour's load on the shared machine hits every system alike.  256-byte values over a
key space of `keyspace` keys; writers talk to the leader.

With `--tls both` (the default) raftkube and each etcd run twice side by side, in plaintext and
with mutual TLS on client and peer ports (rows `raftkube+tls`, `etcd+tls`, `etcd36+tls`), so that the
cost of TLS is measured per system in the same run; pysyncobj has no TLS.
"""

from __future__ import annotations

import contextlib
from typing import Any

from bench.store.context import Context
from bench.store.peers import Peer


def run(ctx: Context) -> dict[str, Any]:
    ctx.progress.start("writes")
    with contextlib.ExitStack() as stack:
        peers: dict[str, Peer] = {}
        for tls in (False, True):
            for s in ctx.systems:
                if tls in ctx.tls_variants(s):
                    peer = stack.enter_context(ctx.cluster(s, "writes", tls=tls))
                    peers[peer.label] = peer
        out: dict[str, list[dict[str, Any]]] = {label: [] for label in peers}
        for level in ctx.sizes.write_levels:
            for label, peer in peers.items():
                leader = peer.leader()
                r = ctx.closed_loop(
                    peer,
                    "write",
                    level,
                    ctx.sizes.write_s,
                    ctx.write_endpoints(peer, leader),
                    f"{label} {level} in flight",
                    prefix="/bench/w/",
                )
                out[label].append(r)
                ctx.progress.update(
                    f"{label} {level} in flight: {r['ops_per_s']:,.0f} writes/s p99 {r['p99_ms']:.1f} ms"
                )
    ctx.progress.end("done")
    return {
        "value_size": ctx.sizes.value_size,
        "seconds": ctx.sizes.write_s,
        "systems": out,
        "tls": tls_cost(out),
    }


def tls_cost(systems: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Per system that ran both ways, per level: writes/s and p99 without and with TLS, and
    what TLS costs in % of the plaintext throughput (negative: TLS was faster, i.e. noise)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for system, rows in systems.items():
        tls_rows = systems.get(f"{system}+tls")
        if system.endswith("+tls") or not tls_rows:
            continue
        out[system] = []
        for plain in rows:
            tls = next((r for r in tls_rows if r["concurrency"] == plain["concurrency"]), None)
            if tls is None or not plain["ops_per_s"]:
                continue
            out[system].append(
                {
                    "concurrency": plain["concurrency"],
                    "plain_ops_per_s": plain["ops_per_s"],
                    "tls_ops_per_s": tls["ops_per_s"],
                    "cost_pct": 100.0 * (1.0 - tls["ops_per_s"] / plain["ops_per_s"]),
                    "plain_p99_ms": plain["p99_ms"],
                    "tls_p99_ms": tls["p99_ms"],
                    "plain_server_cpu_ms_per_op": plain["server_cpu_ms_per_op"],
                    "tls_server_cpu_ms_per_op": tls["server_cpu_ms_per_op"],
                }
            )
    return out
