"""The printed table and the JSON document (machine, load average, versions, cases, targets)."""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from bench.apiserver.backends import versions
from bench.scheduler.targets import GOAL_PODS_PER_S, applies
from bench.store.report import machine as store_machine
from bench.store.targets import Target


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def machine() -> dict[str, Any]:
    m = store_machine()
    for peer in ("etcd", "pysyncobj"):
        m.pop(peer, None)
    extra = {d: _version(d) for d in ("raftkube", "aiohttp", "prometheus_client")}
    return m | {"packages": versions() | extra}


def document(
    config: dict[str, Any], machine_info: dict[str, Any], cases: dict[str, Any], targets: list[Target]
) -> dict[str, Any]:
    machine_info = machine_info | {"load_average_at_end": list(os.getloadavg())}
    return {
        "benchmark": "scheduler",
        "machine": machine_info,
        "config": config,
        "cases": cases,
        "targets": [t.to_json() for t in targets],
    }


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _target(r: dict[str, Any]) -> str:
    if not applies(r):
        return ""
    met = r["complete"] and r["pods_per_s"] >= GOAL_PODS_PER_S
    return f">={GOAL_PODS_PER_S:.0f} {'yes' if met else 'NO'}"


def render(doc: dict[str, Any]) -> str:
    m, cfg, cases = doc["machine"], doc["config"], doc["cases"]
    load = " ".join(f"{x:.2f}" for x in m["load_average_at_start"])
    load_end = " ".join(f"{x:.2f}" for x in m["load_average_at_end"])
    lines = [
        "raftkube scheduler benchmark: one scheduler process (python -m components.scheduler, no leader election) "
        "against one apiserver over a 3-member raftkube store (fsync on); Node objects without kubelets; "
        "each case from a fresh store and apiserver" + (", QUICK" if cfg["quick"] else ""),
        f"machine: {m['cpu_model']}, {m['cores']} cores, Python {m['python']}, aiohttp "
        f"{m['packages']['aiohttp']}, commit {m['git_commit'][:12]}; load average at start {load}, at end {load_end}",
        "window = the scheduler's 'informers synced' log line -> the driver's watch sees the last pod bound; "
        "p50/p99 = the same per pod (the driver's watch; with the whole backlog queued at once, mostly the wait "
        "in the queue); e2e = the scheduler's own histogram (queue entry -> bind answered, interpolated in its "
        "buckets, which end ... 10, 20, 60, 300 s: coarse past 10 s)",
        "CPU = the scheduler process over the window (100 % = one core); wait = its main thread runnable but "
        "waiting for a core (/proc/<pid>/schedstat); ms/pod = its CPU per pod bound; RSS = its peak (VmHWM); "
        "start = process start -> informers synced; api/store CPU = the apiserver / all store members",
        "",
        f"{'pods':>7}{'nodes':>7}{'pods/s':>9}{'target':>11}{'bound':>8}{'window s':>10}{'p50 ms':>9}"
        f"{'p99 ms':>9}{'e2e p50':>9}{'e2e p99':>9}{'CPU':>6}{'wait':>6}{'ms/pod':>8}{'RSS MiB':>9}{'start s':>9}"
        f"{'api CPU':>9}{'store CPU':>10}",
    ]
    for r in cases.values():
        e2e = r["e2e_histogram"]
        lines.append(
            f"{r['pods']:>7,}{r['nodes']:>7,}{r['pods_per_s']:>9,.0f}{_target(r):>11}{r['pods_bound']:>8,}"
            f"{r['window_s']:>10.1f}{_ms(r['p50_ms']):>9}{_ms(r['p99_ms']):>9}{_ms(e2e['p50_ms']):>9}"
            f"{_ms(e2e['p99_ms']):>9}{r['scheduler_cpu_pct']:>5.0f}%{r['scheduler_runnable_waiting_pct']:>5.0f}%"
            f"{r['scheduler_cpu_ms_per_pod'] or 0:>8.1f}"
            f"{r['scheduler_peak_rss_mib']:>9.0f}{r['startup_s']:>9.1f}{r['apiserver_cpu_pct']:>8.0f}%"
            f"{r['store_cpu_pct']:>9.0f}%"
        )
        if not r["complete"]:
            lines.append(
                f"  {r['pods']:,}x{r['nodes']:,}: NOT every pod bound ({r['outcome']}; "
                f"{r['pods_unbound_by_list']:,} unbound by a LIST)"
            )
    failed = cfg.get("failed_cases") or {}
    for key, err in failed.items():
        lines.append(f"  {key}: FAILED: {err[:200]}")
    lines += ["", "TARGETS", f"{'target':<64}{'goal':>10}{'measured':>12}  met"]
    for t in doc["targets"]:
        value = "-" if t["value"] is None else f"{t['value']:,.0f}/s"
        met = "n/a (not measured)" if t["met"] is None else ("yes" if t["met"] else "NO")
        lines.append(f"{t['name']:<64}{t['goal']:>10}{value:>12}  {met}")
    lines += _where_the_time_goes(cases)
    return "\n".join(lines)


def _where_the_time_goes(cases: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    missed = [r for r in cases.values() if applies(r) and not (r["complete"] and r["pods_per_s"] >= GOAL_PODS_PER_S)]
    if missed:
        lines += ["", "WHERE THE TIME GOES (cases that missed the target)"]
        for r in missed:
            wanted = r["scheduler_cpu_pct"] + r["scheduler_runnable_waiting_pct"]
            bound = "CPU-bound" if wanted >= 85 else "not CPU-bound: waiting on the apiserver or its watch"
            lines.append(
                f"{r['pods']:,}x{r['nodes']:,}: the scheduler ran {r['scheduler_cpu_pct']:.0f} % and waited for a "
                f"core {r['scheduler_runnable_waiting_pct']:.0f} % of the window ({bound}), "
                f"{r['scheduler_cpu_ms_per_pod']:.1f} ms CPU per pod -> at most "
                f"{1e3 / max(1e-9, r['scheduler_cpu_ms_per_pod']):,.0f} pods/s on one core; apiserver "
                f"{r['apiserver_cpu_pct']:.0f} %, store {r['store_cpu_pct']:.0f} %, driver {r['driver_cpu_pct']:.0f} %"
            )
            if "profile" not in r:
                lines.append("  (run with --profile for the scheduler's functions)")
    profiled = [r for r in cases.values() if "self" in (r.get("profile") or {})]
    if profiled:
        lines += ["", "SCHEDULER PROFILES (py-spy from synced to the last bind; share of samples)"]
        for r in profiled:
            p = r["profile"]
            lines.append(
                f"{r['pods']:,}x{r['nodes']:,}: busy {p['busy_pct']:.0f} %, {p['samples']:,} samples, {p['file']}"
            )
            lines.append("  self:      " + "; ".join(f"{f['frame']} {f['pct']:.0f}%" for f in p["self"][:8]))
            lines.append("  inclusive: " + "; ".join(f"{f['frame']} {f['pct']:.0f}%" for f in p["inclusive"][:10]))
    return lines
