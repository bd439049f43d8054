"""(d) Pod creates: `writers_in_flight` requests in flight (closed loop, over `clients` processes).
`kind` creates another kind of the load generator's (the custom phase's widgets)."""

from __future__ import annotations

import time
from typing import Any

from bench.apiserver.backends import Backend
from bench.apiserver.context import Context, latency_ms
from bench.apiserver.phases.fanout import split
from bench.store.loadrun import start_together, wait_until


def run(ctx: Context, backend: Backend, namespaces: list[str], kind: str = "pods") -> dict[str, Any]:
    s = ctx.sizes
    label = f"{backend.name}: creates" + ("" if kind == "pods" else f" of {kind}")
    ctx.progress.start(label)
    run_id = f"cre{int(time.time() * 1000) % 10**8}"
    spec = {"mode": "create", "run": run_id, "nodes": 1000, "namespaces": namespaces, "kind": kind, "barrier": True}
    writers = [
        ctx.loadgen(backend, spec | {"connections": len(g), "prefix": f"{run_id}-{k}"}, "create")
        for k, g in enumerate(split(s.writers_in_flight, s.clients))
    ]
    t: dict[str, float] = {}

    def tick() -> None:
        ctx.progress.update(
            f"{label}: {s.writers_in_flight} in flight, {t['t_end'] - time.monotonic():4.1f}s left", True
        )

    try:
        t |= start_together(writers, s.warmup_s, s.create_s)
        wait_until(t["t_measure"], tick)
        with ctx.measuring(backend, "creates") as m:
            wait_until(t["t_end"], tick)
        written = ctx.collect(writers, timeout=60)
    finally:
        ctx.kill(writers)
    ops = sum(w["ops"] for w in written)
    window = max(w["window_s"] for w in written)
    out: dict[str, Any] = (
        {
            "in_flight": s.writers_in_flight,
            "seconds": window,
            "creates": ops,
            "creates_per_s": ops / window,
            "errors": sum(w["errors"] for w in written),
            "first_error": next((w["first_error"] for w in written if w["first_error"]), ""),
            "client_cpu_pct": sum(w["client_cpu_pct"] for w in written),
        }
        | latency_ms([x for w in written for x in w["latencies_s"]])
        | m
    )
    out["apiserver_cpu_ms_per_create"] = 10 * m["apiserver_cpu_pct"] * window / max(1, ops)
    ctx.progress.end(f"{out['creates_per_s']:,.0f} creates/s, p99 {out['p99_ms']:.0f} ms")
    return out
