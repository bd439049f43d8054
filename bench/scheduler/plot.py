"""The PNG: pods/s per case against the goal, pods bound over time, the scheduler's CPU and memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.scheduler.targets import GOAL_NODES, GOAL_PODS_PER_S
from bench.store.plot import bars

COLORS = {100: "#1f77b4", GOAL_NODES: "#ff7f0e"}


def _color(nodes: int) -> str:
    return COLORS.get(nodes, "#7f7f7f")


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(doc["cases"].values())
    if not cases:
        return
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    labels = [f"{r['pods']:,} pods\n{r['nodes']:,} nodes" for r in cases]
    colors = [_color(r["nodes"]) for r in cases]

    ax = axes[0]
    bars(ax, labels, [r["pods_per_s"] for r in cases], colors, "{:,.0f}")
    ax.axhline(GOAL_PODS_PER_S, color="grey", linewidth=0.8, linestyle="--")
    ax.annotate(f"goal on {GOAL_NODES:,} nodes", (0, GOAL_PODS_PER_S), fontsize=7, va="bottom", color="grey")
    ax.set_ylabel("pods/s (synced -> last bind)")
    ax.set_title("scheduling throughput", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)

    ax = axes[1]
    for r in cases:
        t = r["timeline"]
        style = "-" if r["pods"] <= 1000 else "--"
        ax.plot([p[0] for p in t], [p[1] for p in t], style, color=_color(r["nodes"]), label=labels[cases.index(r)])
    ax.set_xlabel("seconds since the scheduler's informers synced")
    ax.set_ylabel("pods bound (driver's watch)")
    ax.set_title("pods bound over time", fontsize=9)
    ax.legend(fontsize=7)

    ax = axes[2]
    bars(ax, labels, [r["scheduler_cpu_ms_per_pod"] or 0.0 for r in cases], colors, "{:.1f}")
    ax.set_ylabel("scheduler CPU ms per pod")
    ax2 = ax.twinx()
    rss = [r["scheduler_peak_rss_mib"] for r in cases]
    ax2.plot(range(len(cases)), rss, "ko-", markersize=4)
    for i, v in enumerate(rss):
        ax2.annotate(f"{v:.0f} MiB", (i, v), textcoords="offset points", xytext=(0, 5), ha="center", fontsize=7)
    ax2.set_ylabel("peak RSS MiB (dots)")
    ax2.set_ylim(0, 1.3 * max(rss))
    ax.set_title("scheduler CPU per pod and memory", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)

    m = doc["machine"]
    fig.suptitle(
        f"raftkube scheduler on Node objects (no kubelets) - {m['cores']} cores ({m['cpu_model']}), "
        f"load {m['load_average_at_start'][0]:.2f}, commit {m['git_commit'][:10]}"
        + (" - QUICK" if doc["config"]["quick"] else ""),
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
