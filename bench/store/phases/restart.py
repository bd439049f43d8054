"""Restart: a follower holding N keys of 1 KiB is killed with SIGKILL, restarted, and timed
until it answers a serializable read of the last key with the right value.  RSS of every
member is read from /proc at that size (and of the restarted member once it serves).
"""

from __future__ import annotations

import time
from typing import Any

from bench.store import procs
from bench.store.context import Context
from bench.store.loadgen import fill_value

SYSTEMS = ("raftkube", "etcd", "etcd36")


def run(ctx: Context) -> dict[str, Any]:
    ctx.progress.start("restart")
    out: dict[str, Any] = {}
    for system in [s for s in ctx.systems if s in SYSTEMS]:
        with ctx.cluster(system, "restart") as peer:
            out[system] = one_system(ctx, peer)
    ctx.progress.end("done")
    return {"keys": ctx.sizes.restart_keys, "value_size": ctx.sizes.restart_value, "systems": out}


def one_system(ctx: Context, peer: Any) -> dict[str, Any]:
    n, size = ctx.sizes.restart_keys, ctx.sizes.restart_value
    leader = peer.leader()
    prefix = "/bench/restart/"
    fill = ctx.fill(peer, ctx.write_endpoints(peer, leader), prefix, n, size, f"{peer.label} restart")
    last_key = f"{prefix}{n - 1:08d}".encode()
    value = fill_value(n - 1, size)
    victim = peer.followers(leader)[0]
    ctx.wait_value(peer, victim, last_key, value, timeout=300)
    time.sleep(1.0)  # let background work (snapshots, compaction) settle before reading RSS
    rss = {f"m{m}": procs.rss_bytes(peer.pid(m) or 0) / 2**20 for m in peer.ids}
    ctx.progress.update(f"{peer.label}: SIGKILL follower m{victim}, restart it")
    peer.kill_member(victim)
    port_wait = peer.wait_ports_free(victim)
    t0 = time.monotonic()
    peer.start_member(victim)
    ctx.wait_value(peer, victim, last_key, value, timeout=300)
    serve_s = time.monotonic() - t0
    rss_after = procs.rss_bytes(peer.pid(victim) or 0) / 2**20
    ctx.progress.update(f"{peer.label}: member serving {n:,} keys {serve_s:.2f}s after restart")
    return {
        "restart_s": serve_s,
        "port_wait_s": port_wait,
        "rss_mib": rss,
        "rss_restarted_mib": rss_after,
        "fill_writes_per_s": fill["ops_per_s"],
        "fill_server_cpu_ms_per_write": 1e3 * fill["server_cpu_s"] / n,
    }
