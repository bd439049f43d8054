"""The report of a cluster chaos run: report.md (verdict, checks, faults, operations, watch
streams) and timeline.png (faults by part over time, writes by outcome), as the store's chaos
report gives them."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from pathlib import Path

from bench.chaos.checks import show
from bench.chaos.run import Outcome


def write(outcome: Outcome, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "report.md").write_text(markdown(outcome))
    (root / "ops.json").write_text(json.dumps([o.__dict__ for o in outcome.ops]))
    (root / "faults.json").write_text(json.dumps([f.__dict__ for f in outcome.faults]))
    with contextlib.suppress(ImportError):  # matplotlib draws it; the verdict does not need it
        timeline(outcome, root / "timeline.png")
    return root / "report.md"


def markdown(o: Outcome) -> str:
    s = o.settings
    verdict = "PASS" if o.passed else "FAIL"
    lines = [
        f"# Cluster chaos, seed {s.seed}: {verdict}",
        "",
        f"{s.duration:.0f} s of faults ({', '.join(s.faults)}) on {s.apiservers} apiservers, 3 store members,"
        + " 2 controller-managers, 2 schedulers, hollow nodes"
        + (" (each on a host of its own: TLS on, network faults from the kernel)" if s.hosts == "netns" else "")
        + f"; {s.writers} writers x {s.keys} ConfigMaps, {s.deployments}"
        f" Deployments scaled; {o.elapsed:.0f} s in all." + (f"  **Canary: {s.canary}.**" if s.canary else ""),
        f"Rerun: `raftkube chaos cluster --seed {s.seed} --duration {s.duration:g} --faults {','.join(s.faults)}"
        + (" --mixed" if s.mixed else "")
        + (f" --hosts {s.hosts}" if s.hosts != "local" else "")
        + (f" --canary {s.canary}" if s.canary else "")
        + "`",
        "",
        "| check | checked | verdict |",
        "|---|---:|---|",
        *(f"| {c.name} | {c.checked} | {'pass' if c.passed else 'FAIL'} |" for c in o.checks),
        "",
    ]
    for c in o.checks:
        if not c.passed:
            lines += [f"## {c.name}", "", *(f"- {v}" for v in show(c.violations) or ["checked nothing"]), ""]
    outcomes = Counter(op.outcome for op in o.ops)
    lines += [
        "## Faults",
        "",
        "| at s | fault | part | for s | note |",
        "|---:|---|---|---:|---|",
        *(f"| {f.started:.1f} | {f.name} | {f.target} | {f.ended - f.started:.1f} | {f.note} |" for f in o.faults),
        "",
        "## Operations",
        "",
        f"{len(o.ops)} writes: {outcomes['ok']} acknowledged, {outcomes['refused']} refused,"
        f" {outcomes['unknown']} of unknown outcome.",
        "",
        "## Watch streams",
        "",
        "| apiserver | segments (410s) | events | resumed breaks |",
        "|---|---:|---:|---:|",
    ]
    for w in o.watches:
        gone = sum(1 for seg in w.segments if seg.ended_by == "410")
        events = sum(len(seg.events) for seg in w.segments)
        breaks = sum(seg.breaks for seg in w.segments)
        lines.append(f"| {w.apiserver} | {len(w.segments)} ({gone}) | {events} | {breaks} |")
    if o.notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in o.notes)]
    return "\n".join(lines) + "\n"


def timeline(o: Outcome, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 6), sharex=True, height_ratios=(2, 1))
    parts = sorted({f.target for f in o.faults})
    colors_of = {"kill": "#d62728", "pause": "#ff7f0e", "stall": "#1f77b4"}  # the rest: network
    least = max(o.settings.duration / 200, 0.3)  # a kill is an instant: drawn visible
    for f in o.faults:
        color = colors_of.get(f.name.split("-")[0], "#9467bd")
        top.barh(parts.index(f.target), max(f.ended - f.started, least), left=f.started, color=color, height=0.6)
    top.set_yticks(range(len(parts)), parts)
    top.set_title(f"seed {o.settings.seed}: faults (red kill, orange pause, blue disk stall, purple network)")
    colors = {"ok": "#2ca02c", "refused": "#7f7f7f", "unknown": "#d62728"}
    for outcome, color in colors.items():
        xs = [op.started for op in o.ops if op.outcome == outcome]
        bottom.scatter(xs, [outcome] * len(xs), s=4, color=color)
    bottom.set_xlabel("seconds since the workload started")
    bottom.set_title("writes by outcome")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
