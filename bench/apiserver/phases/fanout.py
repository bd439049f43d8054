"""(a) Watch fan-out: one watcher per node (fieldSelector=spec.nodeName=node-i) plus a few
unfiltered ones, while pods are created at a fixed rate, each on a node.

Every created pod must reach its node's watcher and every unfiltered watcher; delivery
latency is the receipt time minus the writer's stamp in the pod (taken just before its
request was written, so that it includes the create itself), on the machine's one clock.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from bench.apiserver.backends import Backend
from bench.apiserver.context import Context, latency_ms
from bench.store.loadrun import timing, wait_until

MAX_WRITES_IN_FLIGHT = 64
IDLE_S = 5.0
"""After the last create, watchers stop once no event of theirs came for this long ..."""
DRAIN_S = 60.0
"""... or this long after the last create at most (events still missing then are missed)."""


def split(n: int, parts: int) -> list[list[int]]:
    """Indices 0..n-1 dealt round-robin into `parts` groups (empty groups dropped)."""
    return [g for g in (list(range(k, n, parts)) for k in range(parts)) if g]


def score(
    selectors: list[str], groups: list[list[int]], counts: list[list[int]], created: list[int], nodes: int
) -> dict[str, Any]:
    """Events delivered against expected, watcher by watcher (pure: the phase's arithmetic)."""
    per_node = Counter(seq % nodes for seq in created)
    expected = delivered = missing = extra = complete = 0
    for group, got_list in zip(groups, counts, strict=True):
        for idx, got in zip(group, got_list, strict=True):
            exp = per_node[idx] if selectors[idx] else len(created)
            expected += exp
            delivered += min(got, exp)
            missing += max(0, exp - got)
            extra += max(0, got - exp)
            complete += got >= exp
    return {
        "events_expected": expected,
        "events_delivered": delivered,
        "events_missing": missing,
        "events_extra": extra,
        "watchers_complete": complete,
    }


def run(ctx: Context, backend: Backend, namespaces: list[str]) -> dict[str, Any]:
    s = ctx.sizes
    label = f"{backend.name}: fan-out"
    ctx.progress.start(label)
    rv, _ = ctx.pods_now(backend)
    run_id = f"fan{int(time.time() * 1000) % 10**8}"
    nodes = s.fanout_nodes
    selectors = [f"spec.nodeName=node-{i}" for i in range(nodes)] + [""] * s.fanout_unfiltered
    groups = split(len(selectors), s.clients)
    ready = [ctx.root / f"{backend.name}-fanout-ready-{k}" for k in range(len(groups))]
    base = {
        "mode": "watch",
        "http2": s.watch_http2,
        "run": run_id,
        "latency": True,
        "resource_version": rv,
        "idle_s": IDLE_S,
        "drain_s": DRAIN_S,
    }
    watchers = [
        ctx.loadgen(backend, base | {"selectors": [selectors[i] for i in g], "ready_path": str(p)}, "fanout-watch")
        for g, p in zip(groups, ready, strict=True)
    ]
    try:
        opened = ctx.wait_ready(ready, 30 + len(selectors) / 10, label)
        duration = s.fanout_pods / s.fanout_rate
        t = timing(0.0, duration)
        spec = {
            "mode": "create",
            "connections": MAX_WRITES_IN_FLIGHT,
            "run": run_id,
            "prefix": run_id,
            "nodes": nodes,
            "namespaces": namespaces,
            "rate": s.fanout_rate,
            "count": s.fanout_pods,
            "t_start": t["t_start"],
            "report_created": True,
            "drain_s": 30.0,
        }
        with ctx.measuring(backend, "fanout") as m:
            writer = ctx.loadgen(backend, spec, "fanout-create")
            wait_until(
                t["t_end"],
                lambda: ctx.progress.update(
                    f"{label}: {len(selectors):,} watchers, {s.fanout_rate:.0f} pods/s, "
                    f"{t['t_end'] - time.monotonic():4.1f}s left",
                    transient=True,
                ),
            )
            ctx.progress.update(f"{label}: waiting for the writer", transient=True)
            (w,) = ctx.collect([writer], timeout=90)
            ctx.tell(watchers, f"end {time.monotonic()}")
            ctx.progress.update(f"{label}: draining the watches", transient=True)
            results = ctx.collect(watchers, timeout=DRAIN_S + 30)
    finally:
        ctx.kill(watchers)
    created: list[int] = w["created"]
    scored = score(selectors, groups, [r["counts"] for r in results], created, nodes)
    lat_node = [x for r in results for x in r["latencies_s"]]
    lat_all = [x for r in results for x in r["latencies_unfiltered_s"]]
    out: dict[str, Any] = {
        "watchers": len(selectors),
        "node_watchers": nodes,
        "unfiltered_watchers": s.fanout_unfiltered,
        "watchers_opened": opened["opened"],
        "watch_connections": sum(r["connections"] for r in results),
        "watch_http2": s.watch_http2,
        "watch_failures": [f for r in results for f in r["failures"]][:10],
        "watchers_failed": sum(r["failed"] for r in results),
        "watch_open_s": opened["open_s"],
        "rate_target": s.fanout_rate,
        "pods_scheduled": s.fanout_pods,
        "pods_created": len(created),
        "create_errors": w["errors"],
        "first_error": w["first_error"],
        "writes_per_s": len(created) / w["window_s"] if w["window_s"] else 0.0,
        "writer_max_late_s": w["max_late_s"],
        "create": latency_ms(w["latencies_s"]),
        "drain_s": max(r.get("drain_s", 0.0) for r in results),
        "other_events": sum(r["other_events"] for r in results),
        "watcher_client_cpu_s": sum(r["client_cpu_s"] for r in results),
        "writer_client_cpu_pct": w["client_cpu_pct"],
    }
    out |= scored | latency_ms(lat_node + lat_all) | m
    out["node_watchers_latency"] = latency_ms(lat_node)
    out["unfiltered_watchers_latency"] = latency_ms(lat_all)
    out["delivered_fraction"] = scored["events_delivered"] / max(1, scored["events_expected"])
    ctx.progress.end(
        f"{out['events_delivered']:,}/{out['events_expected']:,} events, p99 {out['p99_ms']:.0f} ms, "
        f"{out['writes_per_s']:.0f} creates/s"
    )
    return out
