"""(g) Memory: what each cached pod costs the apiserver's resident memory, over 10,000 and
over 100,000 pods added.

The server's RSS (/proc/<pid>/status VmRSS: what `top` shows, allocator slack and, for Go,
the garbage its collector has not yet returned included) is read with the pods it holds at the
phase's start, then after each step has added `memory_steps` pods in all (creates at
`writers_in_flight` in flight, as (d), spread over the bench namespaces and 1,000 nodes).
Bytes per cached pod = (RSS at the step - RSS at the start) / (pods at the step - pods at the
start): the growth each pod costs, the server's fixed memory left out.  Every reading waits
`memory_settle_s` (3 s) after the last write, so that the watch cache has applied it and a
collector has had a moment.  Pods are counted from the creates the generator saw answered, not by LISTing them:
a LIST of 100,000 pods would itself take the server's memory up by its response.  After the
other phases the steps start from the pods those left; `--only memory` starts from none.
"""

from __future__ import annotations

import time
from typing import Any

from bench.apiserver.backends import Backend
from bench.apiserver.context import Context
from bench.store import procs


def run(ctx: Context, backend: Backend, namespaces: list[str]) -> dict[str, Any]:
    s = ctx.sizes
    label = f"{backend.name}: memory"
    ctx.progress.start(label)
    _, start_pods = ctx.pods_now(backend)
    time.sleep(s.memory_settle_s)
    start_rss = procs.vm_rss_bytes(backend.pid)
    pods = start_pods
    steps: list[dict[str, Any]] = []
    for step in s.memory_steps:
        target = start_pods + step
        if target <= pods:
            continue
        count = target - pods
        ctx.progress.update(f"{label}: creating {count:,} pods ({step:,} added in all)")
        t0 = time.monotonic()
        fill = ctx.add_pods(backend, count, namespaces, f"memory-{step}", timeout=300 + count / 100)
        if fill["errors"] > count // 100:
            raise RuntimeError(f"adding {count:,} pods: {fill['errors']} creates failed: {fill['first_error']}")
        pods += fill["ops"]
        fill_s = time.monotonic() - t0
        time.sleep(s.memory_settle_s)
        rss = procs.vm_rss_bytes(backend.pid)
        steps.append(
            {
                "added": pods - start_pods,
                "pods": pods,
                "rss_mib": rss / 2**20,
                "fill_s": fill_s,
                "bytes_per_pod": (rss - start_rss) / max(1, pods - start_pods),
                "create_errors": fill["errors"],  # a few (up to 1 %) are counted, not fatal
                "first_error": fill["first_error"][:300],
            }
        )
    out = {"start_pods": start_pods, "start_rss_mib": start_rss / 2**20, "steps": steps}
    for st in steps:
        out[f"bytes_per_pod_{st['added']}"] = st["bytes_per_pod"]
    ctx.progress.end(
        ", ".join(f"+{st['added']:,} pods: {st['rss_mib']:.0f} MiB, {st['bytes_per_pod']:,.0f} B/pod" for st in steps)
    )
    return out
