"""Targets, the printed table and the JSON document of the start-up benchmark.

Targets: pod start-up p99 <= 5 s (kube's SLO, image pulls apart) in every case; every hollow
node Ready, each renewing its Lease on time (no wait between renewals over 15 s: the 10 s
period and a margin, well inside the 40 s after which a node goes NotReady); the hollow-nodes
process within one core and 1 GiB on 1,000 nodes; `raftkube up` to Ready nodes within 10 s.
"""

from __future__ import annotations

import os
from typing import Any

from bench.scheduler.report import machine as scheduler_machine
from bench.store.targets import Target

P99_GOAL_MS = 5000.0
LEASE_GAP_GOAL_S = 15.0
HOLLOW_CPU_GOAL_PCT = 100.0
HOLLOW_RSS_GOAL_MIB = 1024.0
HOLLOW_GOAL_NODES = 1000
UP_GOAL_S = 10.0


def machine() -> dict[str, Any]:
    return scheduler_machine()


def evaluate(cases: dict[str, Any], up: dict[str, Any] | None) -> list[Target]:
    out: list[Target] = []
    for key, r in cases.items():
        met = bool(r["complete"] and r["p99_ms"] <= P99_GOAL_MS)
        out.append(Target(f"start-up p99, {key}", f"<= {P99_GOAL_MS / 1e3:.0f} s", r["p99_ms"] / 1e3, met, "s"))
        lease = r["lease"]
        ok = lease["nodes_renewing"] >= r["nodes"] and lease["nodes_with_gap_over_15s"] == 0
        out.append(
            Target(
                f"{r['nodes']:,} hollow nodes Ready, Leases on time ({key})",
                f"gap <= {LEASE_GAP_GOAL_S:.0f} s",
                lease["max_gap_s"],
                ok,
                "s",
            )
        )
        if r["nodes"] >= HOLLOW_GOAL_NODES:
            hollow = r["processes"]["hollow-nodes"]
            out.append(
                Target(
                    f"hollow-nodes CPU, {r['nodes']:,} nodes",
                    f"<= {HOLLOW_CPU_GOAL_PCT:.0f} %",
                    hollow["cpu_pct"],
                    hollow["cpu_pct"] <= HOLLOW_CPU_GOAL_PCT,
                    "%",
                )
            )
            out.append(
                Target(
                    f"hollow-nodes peak RSS, {r['nodes']:,} nodes",
                    f"<= {HOLLOW_RSS_GOAL_MIB:.0f} MiB",
                    hollow["peak_rss_mib"],
                    hollow["peak_rss_mib"] <= HOLLOW_RSS_GOAL_MIB,
                    "MiB",
                )
            )
    if up is not None:
        out.append(
            Target(
                "raftkube up to Ready nodes",
                f"<= {UP_GOAL_S:.0f} s",
                up["nodes_ready_s"],
                up["nodes_ready_s"] <= UP_GOAL_S,
                "s",
            )
        )
    return out


def document(
    config: dict[str, Any], machine_info: dict[str, Any], cases: dict[str, Any], up: Any, targets: list[Target]
) -> dict[str, Any]:
    return {
        "benchmark": "startup",
        "machine": machine_info | {"load_average_at_end": list(os.getloadavg())},
        "config": config,
        "cases": cases,
        "up": up,
        "targets": [t.to_json() for t in targets],
    }


def _v(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f} {unit}".strip() if unit in ("s", "%") else f"{value:,.0f} {unit}".strip()


def render(doc: dict[str, Any]) -> str:
    m, cases = doc["machine"], doc["cases"]
    load = " ".join(f"{x:.2f}" for x in m["load_average_at_start"])
    load_end = " ".join(f"{x:.2f}" for x in m["load_average_at_end"])
    lines = [
        "raftkube start-up benchmark: pods created through one apiserver over a 3-member raftkube store (fsync on), "
        "scheduled by the scheduler, run by `raftkube hollow-nodes` (fake containers); every process its own, "
        "all on this machine" + (", QUICK" if doc["config"]["quick"] else ""),
        f"machine: {m['cpu_model']}, {m['cores']} cores, Python {m['python']}, commit {m['git_commit'][:12]}; "
        f"load average at start {load}, at end {load_end}",
        "latency = the driver's create answered -> its watch sees the pod Running; Lease gap = a node's longest wait "
        "between renewals over the window; CPU over the window (100 % = one core), RSS = peak (VmHWM)",
        "",
        f"{'case':<22}{'Running':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'nodes Ready s':>15}{'Lease gap s':>13}"
        f"{'hollow CPU':>12}{'hollow RSS':>12}{'api CPU':>9}{'store CPU':>11}{'sched CPU':>11}",
    ]
    for key, r in cases.items():
        p = r["processes"]
        lines.append(
            f"{key:<22}{r['pods_running']:>9,}{r['p50_ms']:>9,.0f}{r['p99_ms']:>9,.0f}{r['max_ms'] or 0:>9,.0f}"
            f"{r['nodes_ready_s']:>15.1f}{r['lease']['max_gap_s'] or 0:>13.1f}"
            f"{p['hollow-nodes']['cpu_pct']:>11.0f}%{p['hollow-nodes']['peak_rss_mib']:>8.0f} MiB"
            f"{p['apiserver']['cpu_pct']:>8.0f}%{p['store (3 members)']['cpu_pct']:>10.0f}%"
            f"{p['scheduler']['cpu_pct']:>10.0f}%"
        )
        if not r["complete"]:
            lines.append(f"  {key}: NOT every pod Running ({r['outcome']})")
    for key, err in (doc["config"].get("failed_cases") or {}).items():
        lines.append(f"  {key}: FAILED: {err[:200]}")
    up = doc.get("up")
    if up:
        lines += [
            "",
            f"raftkube up ({up['what']}): returned in {up['up_returned_s']:.1f} s, "
            f"node-1 and node-2 Ready after {up['nodes_ready_s']:.1f} s; down in {up['down_s']:.1f} s",
        ]
    lines += ["", "TARGETS", f"{'target':<56}{'goal':>16}{'measured':>14}  met"]
    for t in doc["targets"]:
        met = "n/a (not measured)" if t["met"] is None else ("yes" if t["met"] else "NO")
        lines.append(f"{t['name']:<56}{t['goal']:>16}{_v(t['value'], t['unit']):>14}  {met}")
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Any) -> None:
    """Start-up latency per case as a CDF, with the 5 s SLO."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, r in doc["cases"].items():
        xs = [x / 1e3 for x in r["latencies_ms"]]
        if xs:
            ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=key)
    ax.axvline(P99_GOAL_MS / 1e3, color="grey", linewidth=0.8, linestyle="--")
    ax.annotate("SLO 5 s", (P99_GOAL_MS / 1e3, 0.02), fontsize=7, color="grey")
    ax.set_xlabel("pod start-up latency, s (created -> Running seen)")
    ax.set_ylabel("fraction of pods")
    ax.set_title("raftkube start-up latency on hollow nodes", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
