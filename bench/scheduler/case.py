"""One case: `pods` pending pods on `nodes` Node objects, from a fresh store and apiserver.

Each case gets its own store (3 members, fsync on) and apiserver, started as the apiserver
benchmark starts them (bench.apiserver.backends): that takes seconds, where deleting 10,000
pods between cases would take longer, and no case sees another's objects or watch history.

The measured window runs from the scheduler's "informers synced" log line (its cache then holds
every node and every pending pod) to the moment the driver's watch sees the last pod bound.
pods/s = pods bound / that window.  Latency per pod, from the driver: bound (as the watch saw
it) - synced, so with the whole backlog queued at once it is mostly the wait in the queue;
the scheduler's own e2e histogram (queue entry to bind answered, from /metrics, quantiles
interpolated in its buckets) is reported next to it.  CPU = utime + stime of the scheduler
process over the window (start-up apart), and the time its main thread was runnable but
waiting for a core (/proc/<pid>/schedstat: what a busy machine withheld); memory = its
resident set when synced and its peak (VmHWM) at the end.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.apiserver import backends
from bench.apiserver.backends import Backend
from bench.scheduler import cluster, histogram, schedproc
from bench.scheduler.binds import BindWatch
from bench.scheduler.profile import Spy
from bench.store import procs
from bench.store.loadrun import percentile, server_cpu
from bench.store.progress import Progress

E2E = "scheduler_pod_scheduling_sli_duration_seconds"
ATTEMPTS = "scheduler_schedule_attempts_total"
SYNC_TIMEOUT_S = 120.0
MIN_FLOOR_PODS_PER_S = 20.0
"""A case gives up once the scheduler would have to be slower than this to finish."""
TIMELINE_POINTS = 200


@dataclass(frozen=True)
class Case:
    pods: int
    nodes: int

    @property
    def key(self) -> str:
        return f"{self.pods}x{self.nodes}"

    @property
    def label(self) -> str:
        return f"{self.pods:,} pods on {self.nodes:,} nodes"


@dataclass
class Env:
    """What a case needs from the run: where its files go, the progress line, the profile dir."""

    root: Path
    config: Path | None
    progress: Progress
    profile_dir: Path | None = None


def run(case: Case, env: Env) -> dict[str, Any]:
    """Start a store and an apiserver, measure, and stop everything this case started."""
    root = env.root / case.key
    env.progress.start(f"{case.label}")
    env.progress.update("starting the store (3 members) and the apiserver")
    backend = backends.start("raftkube", root, env.config)
    try:
        return asyncio.run(_measure(case, env, backend, root))
    finally:
        backend.stop()
        procs.kill_all()


async def _measure(case: Case, env: Env, backend: Backend, root: Path) -> dict[str, Any]:
    progress = env.progress
    load_start = list(os.getloadavg())

    def built(what: str, done: int, total: int) -> None:
        progress.update(f"creating {what}: {done:,}/{total:,}", transient=True)

    builder = cluster.Builder(backend.target, built)
    size = cluster.NodeSize.for_case(case.pods, case.nodes)
    await builder.namespace()
    t0 = time.monotonic()
    await builder.nodes(case.nodes, size)
    nodes_s = time.monotonic() - t0
    progress.update(f"{case.nodes:,} nodes created in {nodes_s:.1f}s")
    t0 = time.monotonic()
    await builder.pods(case.pods)
    pods_s = time.monotonic() - t0
    progress.update(f"{case.pods:,} pods created in {pods_s:.1f}s; starting the scheduler")

    watch = BindWatch(backend.target, await cluster.resource_version(backend.target), case.pods)
    await watch.open()
    kubeconfig = schedproc.kubeconfig(backend.apiserver.data_dir, backend.endpoint.url)
    sched = schedproc.SchedulerProcess(kubeconfig, root / "scheduler.log")
    spy: Spy | None = None
    try:
        synced = await sched.synced(SYNC_TIMEOUT_S)
        cpu0, wait0, rss_synced = sched.cpu_seconds(), sched.run_delay_seconds(), sched.rss_bytes()
        store_pids = backend.store_pids()
        api0, store0, driver0 = procs.cpu_seconds(backend.pid), server_cpu(store_pids), time.process_time()
        if env.profile_dir is not None:
            spy = Spy(sched.pid, env.profile_dir / f"scheduler-{case.key}.txt", root / "py-spy.log")
        limit = max(60.0, case.pods / MIN_FLOOR_PODS_PER_S)
        outcome = await _wait(case, watch, sched, synced, limit, progress)
        wall = max(1e-9, time.time() - synced)
        cpu1, wait1 = sched.cpu_seconds(), sched.run_delay_seconds()
        api1, store1, driver1 = procs.cpu_seconds(backend.pid), server_cpu(store_pids), time.process_time()
        profile = spy.stop() if spy is not None else None
        spy = None
        samples = await sched.metrics() if sched.alive() else []
        peak_rss = sched.peak_rss_bytes()
    finally:
        if spy is not None:
            spy.stop()
        sched.stop()
        await watch.close()
    unbound = await cluster.unbound(backend.target)

    times = sorted(watch.bound_at.values())
    bound = len(times)
    window = (times[-1] - synced) if times else wall
    after_sync = [t - synced for t in times]
    e2e = histogram.buckets(samples, E2E)
    e2e_p50, e2e_p99 = histogram.quantile(0.5, e2e), histogram.quantile(0.99, e2e)
    cpu_window = cpu1 - cpu0
    per_node = list(watch.nodes.values())
    result: dict[str, Any] = {
        "pods": case.pods,
        "nodes": case.nodes,
        "node_allocatable": size.resources(),
        "pod_requests": {"cpu": cluster.POD_CPU, "memory": cluster.POD_MEMORY},
        "complete": bound == case.pods and unbound == 0,
        "outcome": outcome,
        "pods_bound": bound,
        "pods_unbound_by_list": unbound,
        "pods_per_s": bound / window if window > 0 else 0.0,
        "window_s": window,
        "first_bind_s": after_sync[0] if after_sync else None,
        "pods_per_s_after_first_bind": (
            (bound - 1) / (times[-1] - times[0]) if bound > 1 and times[-1] > times[0] else None
        ),
        "latency_from": "driver: bound as the driver's watch saw it - the scheduler's 'informers synced' log line",
        "p50_ms": 1e3 * percentile(after_sync, 0.50),
        "p99_ms": 1e3 * percentile(after_sync, 0.99),
        "max_ms": 1e3 * after_sync[-1] if after_sync else 0.0,
        "e2e_histogram": {
            "from": f"scheduler /metrics {E2E} (queue entry to bind answered), interpolated in its buckets",
            "count": e2e[-1][1] if e2e else 0,
            "p50_ms": None if e2e_p50 is None else 1e3 * e2e_p50,
            "p99_ms": None if e2e_p99 is None else 1e3 * e2e_p99,
        },
        "attempts": {r: histogram.value(samples, ATTEMPTS, result=r) for r in ("scheduled", "unschedulable", "error")},
        "startup_s": synced - sched.started_at,
        "scheduler_startup_cpu_s": cpu0,
        "scheduler_cpu_s": cpu_window,
        "scheduler_cpu_pct": 100.0 * cpu_window / wall,
        "scheduler_runnable_waiting_pct": 100.0 * (wait1 - wait0) / wall,
        "scheduler_cpu_ms_per_pod": 1e3 * cpu_window / bound if bound else None,
        "scheduler_rss_synced_mib": rss_synced / 2**20,
        "scheduler_peak_rss_mib": peak_rss / 2**20,
        "apiserver_cpu_pct": 100.0 * (api1 - api0) / wall,
        "store_cpu_pct": 100.0 * (store1 - store0) / wall,
        "driver_cpu_pct": 100.0 * (driver1 - driver0) / wall,
        "pods_per_node": {
            "min": min(per_node, default=0),
            "max": max(per_node, default=0),
            "nodes_used": len(per_node),
        },
        "setup": {"nodes_s": nodes_s, "pods_s": pods_s, "pod_creates_per_s": case.pods / pods_s if pods_s else 0},
        "timeline": _timeline(after_sync),
        "load_average_at_start": load_start,
        "load_average_at_end": list(os.getloadavg()),
    }
    if watch.error and bound < case.pods:
        result["watch_error"] = watch.error
    if profile is not None:
        result["profile"] = profile
    progress.end(
        f"{result['pods_per_s']:,.0f} pods/s, {bound:,}/{case.pods:,} bound in {window:.1f}s, "
        f"scheduler CPU {result['scheduler_cpu_pct']:.0f}%, peak RSS {result['scheduler_peak_rss_mib']:.0f} MiB"
    )
    return result


async def _wait(
    case: Case, watch: BindWatch, sched: schedproc.SchedulerProcess, synced: float, limit: float, progress: Progress
) -> str:
    """Until every pod is bound ("complete"), or the scheduler exits, the watch fails or time runs out."""
    last_update = 0.0
    while True:
        # plain sleeps, not wait_for: Python 3.11's wait_for can swallow a cancellation (Ctrl-C)
        await asyncio.sleep(0.02)
        if not watch.all_bound.is_set() and time.monotonic() - last_update < 0.5:
            continue
        last_update = time.monotonic()
        n = len(watch.bound_at)
        if n >= case.pods:
            return "complete"
        if watch.error:
            return watch.error
        if not sched.alive():
            return f"the scheduler exited ({sched.proc.returncode}); see {sched.log}"
        elapsed = time.time() - synced
        if elapsed > limit:
            return f"timed out after {limit:.0f}s"
        progress.update(f"scheduling: {n:,}/{case.pods:,} bound, {n / max(elapsed, 1e-9):,.0f} pods/s", transient=True)


def _timeline(after_sync: list[float]) -> list[list[float]]:
    """[seconds since synced, pods bound by then], at most TIMELINE_POINTS points, for the plot."""
    if not after_sync:
        return []
    step = max(1, len(after_sync) // TIMELINE_POINTS)
    points = [[round(t, 3), i + 1] for i, t in enumerate(after_sync) if (i + 1) % step == 0]
    if points[-1][1] != len(after_sync):
        points.append([round(after_sync[-1], 3), len(after_sync)])
    return [[0.0, 0], *points]
