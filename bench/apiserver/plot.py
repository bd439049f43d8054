"""The PNG: one panel per phase that ran, the backends side by side (bench.store.plot's bars)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.store.plot import COLORS, bars


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ph = doc["phases"]
    panels = [p for p in ("fanout", "throughput", "lists", "creates") if p in ph]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.9), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        _panel(ax, panel, ph[panel])
    m = doc["machine"]
    fig.suptitle(
        f"raftkube apiserver over raftkube vs etcd {m['etcd']} - {m['cores']} cores ({m['cpu_model']}), "
        f"load {m['load_average_at_start'][0]:.2f}, commit {m['git_commit'][:10]}"
        + (" - QUICK" if doc["config"]["quick"] else ""),
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _panel(ax: Any, panel: str, per: dict[str, Any]) -> None:
    names = list(per)
    colors = [COLORS.get(b, "grey") for b in names]
    if panel == "fanout":
        labels, values, cols = [], [], []
        for b, c in zip(names, colors, strict=True):
            for q in ("p50_ms", "p99_ms"):
                labels.append(f"{b}\n{q[:3]}")
                values.append(per[b][q])
                cols.append(c)
        bars(ax, labels, values, cols, "{:,.0f}")
        ax.axhline(500, color="grey", linewidth=0.8, linestyle="--")
        ax.set_ylabel("delivery latency (ms)")
        r = per[names[0]]
        ax.set_title(f"(a) fan-out: {r['watchers']:,} watchers, {r['rate_target']:.0f} pods/s", fontsize=9)
    elif panel == "throughput":
        bars(ax, names, [per[b]["events_per_s"] for b in names], colors, "{:,.0f}")
        ax.axhline(100_000, color="grey", linewidth=0.8, linestyle="--")
        ax.set_ylabel("events/s delivered")
        ax.set_title(f"(b) {per[names[0]]['watchers']} unfiltered watchers, full write speed", fontsize=9)
    elif panel == "lists":
        labels, values, cols = [], [], []
        for b, c in zip(names, colors, strict=True):
            for kind in ("cache", "consistent"):
                labels.append(f"{b}\n{kind}")
                values.append(per[b][kind]["p99_ms"])
                cols.append(c)
        bars(ax, labels, values, cols, "{:,.0f}")
        ax.axhline(500, color="grey", linewidth=0.8, linestyle="--")
        ax.set_ylabel("p99 latency (ms)")
        ax.set_title(f"(c) LIST of {per[names[0]]['cache']['items']:,} pods", fontsize=9)
    elif panel == "creates":
        bars(ax, names, [per[b]["creates_per_s"] for b in names], colors, "{:,.0f}")
        ax.axhline(2000, color="grey", linewidth=0.8, linestyle="--")
        ax.set_ylabel("pod creates/s")
        p99 = ", ".join(f"{b} p99 {per[b]['p99_ms']:.0f} ms" for b in names)
        ax.set_title(f"(d) creates at {per[names[0]]['in_flight']} in flight\n{p99}", fontsize=9)
