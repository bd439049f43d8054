"""The network benchmark's document, its printed table and its target."""

from __future__ import annotations

import os
from typing import Any

from bench.scheduler.report import machine as scheduler_machine
from bench.store.targets import Target

SYNC_P99_GOAL_S = 1.0
GOAL_SERVICES = 1000


def machine() -> dict[str, Any]:
    return scheduler_machine()


def evaluate(sync: dict[str, Any] | None) -> list[Target]:
    if not sync or "ours" not in sync:
        return [Target("EndpointSlice change to live rule p99", f"<= {SYNC_P99_GOAL_S:g} s", None, None, "s")]
    runs = [sync[k] for k in ("ours", "ours_again") if k in sync]  # judged by the worse of our runs
    n = sync["services"]
    p99s = [r["p99_s"] for r in runs]
    p99 = None if None in p99s else max(p99s)
    met = (
        None
        if n < GOAL_SERVICES
        else bool(p99 is not None and p99 <= SYNC_P99_GOAL_S and not any(r["missed"] for r in runs))
    )
    return [
        Target(f"EndpointSlice change to live rule p99, {n:,} Services", f"<= {SYNC_P99_GOAL_S:g} s", p99, met, "s")
    ]


def document(
    config: dict[str, Any], machine_info: dict[str, Any], datapath: Any, sync: Any, failed: dict[str, str]
) -> dict[str, Any]:
    return {
        "benchmark": "network",
        "machine": machine_info | {"load_average_at_end": list(os.getloadavg())},
        "config": config,
        "datapath": datapath,
        "sync": sync,
        "failed": failed,
        "targets": [t.to_json() for t in evaluate(sync)],
    }


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def render(doc: dict[str, Any]) -> str:
    m, cfg = doc["machine"], doc["config"]
    load = " ".join(f"{x:.2f}" for x in m["load_average_at_start"])
    load_end = " ".join(f"{x:.2f}" for x in m["load_average_at_end"])
    lines = [
        "raftkube network benchmark: the service proxy's datapath against pod-to-pod direct, and EndpointSlice "
        "change to live rule; everything in private network namespaces" + (", QUICK" if cfg["quick"] else ""),
        f"machine: {m['cpu_model']}, {m['cores']} cores, Python {m['python']}, commit {m['git_commit'][:12]}; "
        f"load average at start {load}, at end {load_end}",
    ]
    d = doc.get("datapath")
    if d:
        lines += [
            "",
            f"DATAPATH: {d['what']}; {cfg['duration_s']:g} s a path, in {2 * d['cycles']} runs each, order "
            f"(direct, service, service, direct) x {d['cycles']}",
            f"{'path':<34}{'requests/s':>12}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'errors':>8}",
        ]
        for key, label in (("direct", "pod-to-pod direct (peer)"), ("service", "ClusterIP via the proxy's table")):
            r = d[key]
            lines.append(
                f"{label:<34}{r['rate_per_s']:>12,.0f}{_f(r['p50_ms'], '.2f'):>9}{_f(r['p90_ms'], '.2f'):>9}"
                f"{_f(r['p99_ms'], '.2f'):>9}{r['errors']:>8}"
            )
        spread = "; ".join(
            f"{key} " + ", ".join(f"{r['rate_per_s']:,.0f}" for r in d[key]["runs"]) for key in ("direct", "service")
        )
        lines.append(
            f"{'service / direct':<34}{_f(d['rate_ratio_service_to_direct'], '.3f'):>12}"
            f"{_f(d['p50_ratio_service_to_direct'], '.3f'):>9}{'':>9}{_f(d['p99_ratio_service_to_direct'], '.3f'):>9}"
        )
        lines.append(f"  each run's requests/s (in the order run, per leg): {spread}")
    s = doc.get("sync")
    if s:
        lines += [
            "",
            f"SYNC: {s['services']:,} Services with 2 endpoints each (raftkube up, no kubelets, controller-manager "
            f"stopped); {s['changes']} slice PATCHes, one every {s['interval_s']:g} s; latency = the PATCH answered "
            "-> the first `nft list chains ip` in the proxy's namespace that shows the new endpoint (an upper bound "
            "by one listing)",
            f"{'proxy':<58}{'p50 s':>8}{'p99 s':>8}{'max s':>8}{'missed':>8}{'listing s':>11}{'first table s':>15}",
        ]
        rows = [s["ours"]] if "ours" in s else []
        peers = s.get("kube_proxy") or {}
        if "not_run" in peers:
            lines.append(f"  kube-proxy not run: {peers['not_run']}")
        else:
            rows += list(peers.values())
        if "ours_again" in s:
            rows.append(s["ours_again"])
        for r in rows:
            lines.append(
                f"{r['proxy'][:57]:<58}{_f(r['p50_s'], '.3f'):>8}{_f(r['p99_s'], '.3f'):>8}{_f(r['max_s'], '.3f'):>8}"
                f"{r['missed']:>8}{_f(r['listing_p50_s'], '.3f'):>11}{r['full_table_after_start_s']:>15.1f}"
            )
        for key in ("ours", "ours_again"):
            own = (s.get(key) or {}).get("own_metric")
            if own:
                lines.append(
                    f"  {s[key]['proxy']}, its own raftkube_proxy_sync_latency_seconds over the changes: "
                    f"{own['syncs']} syncs, p50 in the bucket <= {own['p50_bucket_le_s']} s, "
                    f"p99 <= {own['p99_bucket_le_s']} s"
                )
    for key, err in doc["failed"].items():
        lines.append(f"  {key}: FAILED: {err[:300]}")
    lines += ["", "TARGETS", f"{'target':<56}{'goal':>10}{'measured':>12}  met"]
    for t in doc["targets"]:
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "NO")
        lines.append(f"{t['name']:<56}{t['goal']:>10}{_f(t['value'], '.3f') + ' s':>12}  {met}")
    return "\n".join(lines)
