"""Failover: write unavailability after SIGKILL of the leader under load.

One load generator writes (16 in flight) for the whole phase and records the start and end
of every successful write.  Each write has a 0.3 s deadline (after which the writer issues a
new one): an etcd follower forwards a proposal to the leader it still believes in, and a
proposal sent to a dead leader is only answered by etcd's 7 s request timeout, which would
measure the client's patience rather than the cluster's availability.  For each kill: the
unavailability is the time from the kill to the end of the first successful write that
started after it.  The killed member is then restarted and must be healthy before the next.
"""

from __future__ import annotations

import statistics
import time
from array import array
from typing import Any

from bench.store import procs
from bench.store.context import Context
from bench.store.loadrun import LoadProcess, timing, wait_until

SYSTEMS = ("raftkube", "etcd", "etcd36")
IN_FLIGHT = 16
REQUEST_TIMEOUT_S = 0.3


def run(ctx: Context) -> dict[str, Any]:
    ctx.progress.start("failover")
    out: dict[str, Any] = {}
    for system in [s for s in ctx.systems if s in SYSTEMS]:
        with ctx.cluster(system, "failover") as peer:
            out[system] = one_system(ctx, peer)
    ctx.progress.end("done")
    return {"kills": ctx.sizes.kills, "in_flight": IN_FLIGHT, "request_timeout_s": REQUEST_TIMEOUT_S, "systems": out}


def one_system(ctx: Context, peer: Any) -> dict[str, Any]:
    leader = peer.leader()
    path = ctx.root / f"timeline-{peer.name}.bin"
    t = timing(0.5, 3600.0)
    gen = LoadProcess(
        peer.client_spec()
        | {"mode": "timeline", "endpoints": ctx.write_endpoints(peer, leader)}
        | {"concurrency": IN_FLIGHT, "value_size": ctx.sizes.value_size, "keyspace": ctx.sizes.keyspace}
        | {"prefix": "/bench/f/", "timeline_path": str(path), "timeout_s": REQUEST_TIMEOUT_S}
        | t,
        ctx.log(f"{peer.label}-failover"),
    )
    kills: list[dict[str, Any]] = []
    try:
        wait_until(t["t_measure"] + 1.0)
        for k in range(ctx.sizes.kills):
            leader = peer.leader(timeout=30)
            ctx.progress.update(f"{peer.label} kill {k + 1}/{ctx.sizes.kills}: SIGKILL leader m{leader}")
            t_kill = peer.kill_member(leader)
            new = peer.leader(timeout=30, exclude=(leader,))
            t_leader = time.monotonic()
            time.sleep(1.0)  # let writes flow again under the new leader
            peer.wait_ports_free(leader)
            peer.start_member(leader)
            healthy = peer.wait_healthy(leader, timeout=60)
            kills.append(
                {
                    "killed": leader,
                    "t_kill": t_kill,
                    "new_leader": new,
                    "leader_seen_s": t_leader - t_kill,
                    "rejoin_s": healthy,
                }
            )
            time.sleep(1.0)
        gen.stop()
        res = gen.result(timeout=30)
    finally:
        procs.kill(gen.pid, wait=1.0)
    starts, ends = _read_timeline(path)
    for kill in kills:
        after = [e for s, e in zip(starts, ends, strict=True) if s >= kill["t_kill"]]
        kill["unavailable_s"] = (min(after) - kill["t_kill"]) if after else None
        del kill["t_kill"]
    values = [kill["unavailable_s"] for kill in kills if kill["unavailable_s"] is not None]
    r = {
        "kills": kills,
        "median_s": statistics.median(values) if values else None,
        "max_s": max(values) if values else None,
        "writes": len(starts),
        "errors": res["errors"],
        "client_cpu_pct": res["client_cpu_pct"],
    }
    if values:
        ctx.progress.update(f"{peer.label}: median {r['median_s']:.2f}s max {r['max_s']:.2f}s")
    return r


def _read_timeline(path: Any) -> tuple[array[float], array[float]]:
    data = array("d")
    with open(path, "rb") as f:
        data.frombytes(f.read())
    n = len(data) // 2
    return data[:n], data[n:]
