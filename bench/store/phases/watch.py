"""Watch: events delivered per second to 1, 10 and 100 watchers on a prefix while writes run
at full speed, and the catch-up time of one watcher replaying history from revision 1.

Watchers sit on a follower (any member serves watches in both systems; the leader is busy
with the writes), in their own load generator process; the writers in another.
"""

from __future__ import annotations

import time
from typing import Any

from bench.store import procs
from bench.store.context import Context
from bench.store.loadgen import fill_value
from bench.store.loadrun import LoadProcess, server_cpu, timing, wait_until

SYSTEMS = ("raftkube", "etcd", "etcd36")


def run(ctx: Context) -> dict[str, Any]:
    ctx.progress.start("watch")
    out: dict[str, dict[str, Any]] = {}
    for system in [s for s in ctx.systems if s in SYSTEMS]:
        with ctx.cluster(system, "watch") as peer:
            out[system] = {"fanout": [fanout(ctx, peer, w) for w in ctx.sizes.watchers]}
        with ctx.cluster(system, "catchup") as peer:
            out[system]["catchup"] = catchup(ctx, peer)
    ctx.progress.end("done")
    return {"seconds": ctx.sizes.watch_s, "writers_in_flight": ctx.sizes.watch_writers, "systems": out}


def fanout(ctx: Context, peer: Any, watchers: int) -> dict[str, Any]:
    leader = peer.leader()
    follower = peer.followers(leader)[0]
    prefix = f"/bench/watch{watchers}/"
    t = timing(ctx.sizes.warmup_s + 0.5, ctx.sizes.watch_s)
    common = peer.client_spec() | {"prefix": prefix, "value_size": ctx.sizes.value_size} | t
    watch_gen = LoadProcess(
        common
        | {"mode": "watch", "endpoints": [peer.endpoint(follower)], "watch_endpoint": peer.endpoint(follower)}
        | {"watchers": watchers},
        ctx.log(f"{peer.label}-watchers"),
    )
    write_gen = LoadProcess(
        common
        | {"mode": "write", "endpoints": ctx.write_endpoints(peer, leader), "concurrency": ctx.sizes.watch_writers}
        | {"keyspace": ctx.sizes.keyspace, "t_start": t["t_start"] + 0.3},
        ctx.log(f"{peer.label}-watch-writer"),
    )
    label = f"{peer.label} {watchers} watchers"
    try:
        wait_until(t["t_measure"], lambda: ctx.progress.update(f"{label}: warming up", transient=True))
        pids = peer.pids()
        cpu0 = server_cpu(pids)
        wait_until(
            t["t_end"],
            lambda: ctx.progress.update(f"{label}: {t['t_end'] - time.monotonic():4.1f}s left", transient=True),
        )
        cpu1 = server_cpu(pids)
        w = watch_gen.result(timeout=30)
        wr = write_gen.result(timeout=30)
    finally:
        procs.kill(watch_gen.pid, wait=1.0)
        procs.kill(write_gen.pid, wait=1.0)
    r = {
        "watchers": watchers,
        "events": w["events"],
        "events_per_s": w["events"] / w["window_s"],
        "watcher_client_cpu_pct": w["client_cpu_pct"],
        "writes_per_s": wr["ops"] / wr["window_s"],
        "writer_client_cpu_pct": wr["client_cpu_pct"],
        "write_errors": wr["errors"],
        "server_cpu_pct": 100.0 * (cpu1 - cpu0) / w["window_s"],
    }
    # Every write is due to every watcher: the delivered fraction shows a watcher falling behind.
    r["delivered_fraction"] = r["events_per_s"] / (r["writes_per_s"] * watchers) if r["writes_per_s"] else 0.0
    ctx.progress.update(f"{label}: {r['events_per_s']:,.0f} events/s at {r['writes_per_s']:,.0f} writes/s")
    return r


def catchup(ctx: Context, peer: Any) -> dict[str, Any]:
    """Write N keys, then time one watcher from revision 1 until the N-th event arrives."""
    n = ctx.sizes.catchup_events
    leader = peer.leader()
    follower = peer.followers(leader)[0]
    prefix = "/bench/catchup/"
    fill = ctx.fill(peer, ctx.write_endpoints(peer, leader), prefix, n, ctx.sizes.value_size, f"{peer.label} catch-up")
    last_key = f"{prefix}{n - 1:08d}".encode()
    value = fill_value(n - 1, ctx.sizes.value_size)
    ctx.wait_value(peer, follower, last_key, value, timeout=120)
    t = timing(0.0, 600.0)
    gen = LoadProcess(
        peer.client_spec()
        | {"mode": "watch", "endpoints": [peer.endpoint(follower)], "prefix": prefix}
        | {"watch_endpoint": peer.endpoint(follower), "watchers": 1, "start_revision": 1, "expect": n}
        | t,
        ctx.log(f"{peer.label}-catchup"),
    )
    try:
        t0 = time.monotonic()
        while gen.proc.poll() is None and time.monotonic() < t["t_end"] + 5:
            ctx.progress.update(f"{peer.label} catch-up of {n:,} events: {time.monotonic() - t0:.0f}s", transient=True)
            time.sleep(0.25)
        r = gen.result(timeout=30)
    finally:
        procs.kill(gen.pid, wait=1.0)
    r["events_per_s"] = r["events"] / r["seconds"] if r["seconds"] else 0.0
    r["fill_writes_per_s"] = fill["ops_per_s"]
    ctx.progress.update(f"{peer.label} catch-up: {r['events']:,} events in {r['seconds']:.2f}s")
    return r
