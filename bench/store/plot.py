"""The PNG: one panel per phase that ran, systems side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLORS = {"raftkube": "#1f77b4", "etcd": "#2ca02c", "etcd36": "#8c564b", "pysyncobj": "#d62728"}


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ph = doc["phases"]
    panels: list[str] = []
    if "writes" in ph:
        panels += ["writes", "p99"]
    if "reads" in ph:
        panels.append("reads")
    if "watch" in ph:
        panels += ["watch", "catchup"]
    if "failover" in ph:
        panels.append("failover")
    if "restart" in ph:
        panels.append("restart")
    if "slow-watchers" in ph:
        panels.append("slow-watchers")
    if not panels:
        return
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for ax, panel in zip(flat, panels, strict=False):
        _panel(ax, panel, ph)
    for ax in flat[len(panels) :]:
        ax.axis("off")
    m = doc["machine"]
    etcd36 = f" vs etcd {m['etcd36']}" if "etcd36" in doc["config"]["systems"] else ""
    fig.suptitle(
        f"raftkube vs etcd {m['etcd']}{etcd36} vs pysyncobj {m['pysyncobj']} - {doc['config']['members']} members, "
        f"{m['cores']} cores ({m['cpu_model']}), commit {m['git_commit'][:10]}",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bars(ax: Any, labels: list[str], values: list[float], colors: list[str], fmt: str) -> None:
    bars = ax.bar(labels, values, color=colors)
    for b, v in zip(bars, values, strict=True):
        ax.annotate(
            fmt.format(v), (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=8
        )


def _panel(ax: Any, panel: str, ph: dict[str, Any]) -> None:
    if panel in ("writes", "p99"):
        key = "ops_per_s" if panel == "writes" else "p99_ms"
        for s, rows in ph["writes"]["systems"].items():
            xs = [r["concurrency"] for r in rows]
            style = "--" if s.endswith("+tls") else "-"
            ax.plot(xs, [r[key] for r in rows], style, marker="o", label=s, color=COLORS.get(s.split("+")[0]))
        ax.set_xscale("log", base=4)
        levels = sorted({r["concurrency"] for rows in ph["writes"]["systems"].values() for r in rows})
        ax.set_xticks(levels, [str(x) for x in levels])
        ax.set_xlabel("writes in flight")
        ax.set_ylabel("writes/s" if panel == "writes" else "p99 latency (ms)")
        if panel == "p99":
            ax.set_yscale("log")
        ax.set_title("write throughput" if panel == "writes" else "write p99 latency")
        ax.legend(fontsize=8)
    elif panel == "reads":
        labels, values, colors = [], [], []
        for s, kinds in ph["reads"]["systems"].items():
            for kind, r in kinds.items():
                labels.append(f"{s}\n{kind[:6]}")
                values.append(r["ops_per_s"])
                colors.append(COLORS.get(s, "grey"))
        bars(ax, labels, values, colors, "{:,.0f}")
        ax.set_ylabel("reads/s")
        ax.set_title(f"reads ({ph['reads']['concurrency']} in flight)")
        ax.tick_params(axis="x", labelsize=7)
    elif panel == "watch":
        for s, v in ph["watch"]["systems"].items():
            rows = v.get("fanout", [])
            ax.plot(
                [r["watchers"] for r in rows],
                [r["events_per_s"] for r in rows],
                marker="o",
                label=s,
                color=COLORS.get(s),
            )
        ax.set_xscale("log")
        ax.set_xlabel("watchers")
        ax.set_ylabel("events/s delivered")
        ax.set_title("watch fan-out under full write load")
        ax.legend(fontsize=8)
    elif panel == "catchup":
        items = [(s, v["catchup"]) for s, v in ph["watch"]["systems"].items() if "catchup" in v]
        bars(
            ax,
            [s for s, _ in items],
            [c["seconds"] for _, c in items],
            [COLORS.get(s, "grey") for s, _ in items],
            "{:.2f} s",
        )
        n = items[0][1]["expected"] if items else 0
        ax.set_ylabel("seconds")
        ax.set_title(f"catch-up of {n:,} historic events")
    elif panel == "failover":
        items = [(s, r) for s, r in ph["failover"]["systems"].items() if r["median_s"] is not None]
        bars(
            ax,
            [s for s, _ in items],
            [r["median_s"] for _, r in items],
            [COLORS.get(s, "grey") for s, _ in items],
            "{:.2f} s",
        )
        for i, (_, r) in enumerate(items):
            ys = [k["unavailable_s"] for k in r["kills"] if k["unavailable_s"] is not None]
            ax.scatter([i] * len(ys), ys, color="black", s=10, zorder=3)
        ax.set_ylabel("seconds (bar: median, dots: each kill)")
        ax.set_title("write unavailability after leader SIGKILL")
    elif panel == "restart":
        items = list(ph["restart"]["systems"].items())
        bars(
            ax,
            [s for s, _ in items],
            [r["restart_s"] for _, r in items],
            [COLORS.get(s, "grey") for s, _ in items],
            "{:.2f} s",
        )
        ax.set_ylabel("seconds")
        ax.set_title(f"restart of a {ph['restart']['keys']:,} x {ph['restart']['value_size']} B member")
    elif panel == "slow-watchers":
        sw = ph["slow-watchers"]
        for r in sw["runs"]:
            trace = r["rss_trace_mib"]
            name = f"with {r['stalled']}" if r["stalled"] else "without"
            label = f"{name} never-reading: {r['events_per_s']:,.0f} events/s"
            color = "#d62728" if r["stalled"] else "#1f77b4"
            style = "-" if r["stalled"] else ":"
            ax.plot([p[0] for p in trace], [p[1] for p in trace], style, color=color, label=label)
        ax.axhline(512, color="grey", linewidth=0.8)
        if sw["runs"]:
            stages = sw["runs"][0]["stages_s"]
            ax.axvline(stages["t_start"], color="grey", linestyle="--", linewidth=0.8)
            ax.axvspan(stages["t_measure"], stages["t_end"], color="grey", alpha=0.1)
        ax.set_xlabel("s since writes began (dashed: readers join; shaded: counted)", fontsize=8)
        ax.set_ylabel("member RSS (MiB)")
        ax.set_title(f"{sw['watchers']:,} watchers on one member, {sw['stalled']} never read")
        ax.legend(fontsize=7)
