"""(c) LIST of every pod: from the watch cache (resourceVersion=0) and consistent (unset).

The cluster is topped up to `list_pods` pods first (the earlier phases usually made them);
requests go one after the other on one keep-alive connection.
"""

from __future__ import annotations

from typing import Any

from bench.apiserver.backends import Backend
from bench.apiserver.context import Context, latency_ms

KINDS = {"cache": "/api/v1/pods?resourceVersion=0", "consistent": "/api/v1/pods"}


def run(ctx: Context, backend: Backend, namespaces: list[str]) -> dict[str, Any]:
    s = ctx.sizes
    label = f"{backend.name}: LIST"
    ctx.progress.start(label)
    _, have = ctx.pods_now(backend)
    if have < s.list_pods:
        ctx.progress.update(f"{label}: creating {s.list_pods - have:,} pods")
        fill = ctx.add_pods(backend, s.list_pods - have, namespaces, "list-fill", timeout=300)
        if fill["errors"]:
            raise RuntimeError(f"filling for LIST: {fill['errors']} creates failed: {fill['first_error']}")
    out: dict[str, Any] = {"requests": s.list_requests}
    for kind, path in KINDS.items():
        ctx.progress.update(f"{label}: {s.list_requests} x {kind}")
        gen = ctx.loadgen(backend, {"mode": "list", "path": path, "requests": s.list_requests}, f"list-{kind}")
        with ctx.measuring(backend, f"list-{kind}") as m:
            (r,) = ctx.collect([gen], timeout=600)
        out[kind] = (
            {
                "path": path,
                "ok": r["ops"],
                "errors": r["errors"],
                "first_error": r["first_error"],
                "items": r["items"],
                "bytes": r["bytes"],
                "client_cpu_pct": r["client_cpu_pct"],
                "apiserver_cpu_ms_per_list": 1e3 * m["apiserver_cpu_pct"] / 100 * r["window_s"] / max(1, r["ops"]),
            }
            | latency_ms(r["latencies_s"])
            | m
        )
    ctx.progress.end(
        f"{out['cache']['items']:,} pods: cache p99 {out['cache']['p99_ms']:.0f} ms, "
        f"consistent p99 {out['consistent']['p99_ms']:.0f} ms"
    )
    return out
