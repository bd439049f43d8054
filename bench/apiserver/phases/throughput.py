"""(b) Watch throughput: unfiltered pod watchers while writers create pods as fast as they can.

The watchers count event lines received inside the measured window (no parsing), so that
the figure is the apiserver's delivery rate rather than a client's JSON decoder.  `kind`
watches and creates another kind of the load generator's (the custom phase's widgets).
"""

from __future__ import annotations

import time
from typing import Any

from bench.apiserver.backends import Backend
from bench.apiserver.context import Context, latency_ms
from bench.apiserver.loadgen import KINDS
from bench.apiserver.phases.fanout import split
from bench.store.loadrun import start_together, wait_until


def run(ctx: Context, backend: Backend, namespaces: list[str], kind: str = "pods") -> dict[str, Any]:
    s = ctx.sizes
    label = f"{backend.name}: watch throughput" + ("" if kind == "pods" else f" of {kind}")
    ctx.progress.start(label)
    rv, _ = ctx.pods_now(backend, f"{KINDS[kind][1]}/{kind}")
    run_id = f"thr{int(time.time() * 1000) % 10**8}"
    groups = split(s.throughput_watchers, s.clients)
    ready = [ctx.root / f"{backend.name}-throughput-ready-{k}" for k in range(len(groups))]
    base = {"mode": "watch", "run": run_id, "latency": False, "resource_version": rv, "kind": kind}
    base |= {"http2": s.watch_http2}
    watchers = [
        ctx.loadgen(backend, base | {"selectors": [""] * len(g), "ready_path": str(p)}, "throughput-watch")
        for g, p in zip(groups, ready, strict=True)
    ]
    writers = []
    try:
        opened = ctx.wait_ready(ready, 30 + s.throughput_watchers / 10, label)
        spec = {"mode": "create", "run": run_id, "nodes": 1000, "namespaces": namespaces, "kind": kind}
        writers = [
            ctx.loadgen(
                backend, spec | {"connections": c, "prefix": f"{run_id}-{k}", "barrier": True}, "throughput-create"
            )
            for k, c in enumerate(len(g) for g in split(s.writers_in_flight, s.clients))
        ]
        t = start_together(writers, s.warmup_s, s.throughput_s)
        ctx.tell(watchers, f"go {t['t_measure']} {t['t_end']}")

        def tick() -> None:
            ctx.progress.update(f"{label}: {t['t_end'] - time.monotonic():4.1f}s left", transient=True)

        wait_until(t["t_measure"], tick)
        with ctx.measuring(backend, "throughput") as m:
            wait_until(t["t_end"], tick)
        results = ctx.collect(watchers, timeout=60)
        written = ctx.collect(writers, timeout=60)
    finally:
        ctx.kill(watchers + writers)
    window = max(r["window_s"] for r in results)
    events = sum(r["events"] for r in results)
    writes = sum(w["ops"] for w in written)
    wwin = max(w["window_s"] for w in written)
    out: dict[str, Any] = {
        "watchers": s.throughput_watchers,
        "watchers_opened": opened["opened"],
        "watch_connections": sum(r["connections"] for r in results),
        "watch_http2": s.watch_http2,
        "watch_failures": [f for r in results for f in r["failures"]][:10],
        "watchers_failed": sum(r["failed"] for r in results),
        "writers_in_flight": s.writers_in_flight,
        "seconds": window,
        "events": events,
        "events_per_s": events / window,
        "writes_per_s": writes / wwin,
        "create_errors": sum(w["errors"] for w in written),
        "first_error": next((w["first_error"] for w in written if w["first_error"]), ""),
        "create": latency_ms([x for w in written for x in w["latencies_s"]]),
        "delivered_fraction": events / max(1, writes * s.throughput_watchers),
        "watcher_client_cpu_pct": sum(r["client_cpu_pct"] for r in results),
        "writer_client_cpu_pct": sum(w["client_cpu_pct"] for w in written),
    } | m
    ctx.progress.end(f"{out['events_per_s']:,.0f} events/s to {s.throughput_watchers} watchers")
    return out
