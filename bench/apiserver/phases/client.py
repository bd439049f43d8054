"""The load generators' HTTP client: CPU per request of ours (raw asyncio streams) and httpx.

Both speak HTTP/1.1 with keep-alive over the same TLS context, GETting one small object with
a few connections in flight; the cheaper one is what the other phases use (ours, so far).
"""

from __future__ import annotations

from typing import Any

from bench.apiserver.backends import Backend
from bench.apiserver.context import Context

CONNECTIONS = 4


def run(ctx: Context, backend: Backend, namespaces: list[str]) -> dict[str, Any]:
    ctx.progress.start(f"{backend.name}: HTTP client cost")
    path = f"/api/v1/namespaces/{namespaces[0]}"
    spec = {"mode": "client", "path": path, "requests": ctx.sizes.client_requests, "connections": CONNECTIONS}
    (r,) = ctx.collect([ctx.loadgen(backend, spec, "client")], timeout=300)
    r.pop("pid", None)
    raw, hx = r["raw_asyncio"], r["httpx"]
    out = {
        "backend": backend.name,
        "path": path,
        "connections": CONNECTIONS,
        "clients": {"raw_asyncio": raw, "httpx": hx},
    }
    out["httpx_over_raw_cpu"] = hx["client_cpu_ms_per_request"] / raw["client_cpu_ms_per_request"]
    ctx.progress.end(
        f"raw asyncio {raw['client_cpu_ms_per_request']:.3f} ms CPU/request, httpx "
        f"{hx['client_cpu_ms_per_request']:.3f} ms ({out['httpx_over_raw_cpu']:.1f}x)"
    )
    return out
