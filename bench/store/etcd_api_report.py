"""`raftkube bench store --api etcd`'s table, printed and as Markdown: raftkube and etcd 3.6 side
by side per workload and client count, with raftkube's figure over etcd's, then the targets.

One set of rows serves both forms, so that the Markdown written beside the JSON says what the
terminal said.  Standard library only (the report's unit test needs no cluster).
"""

from __future__ import annotations

from typing import Any

from bench.store.etcd_tool import WORKLOADS

SYSTEMS = ("raftkube", "etcd36")
HEADER = (
    "workload",
    "clients",
    "conns",
    "raftkube req/s",
    "etcd 3.6 req/s",
    "ratio",
    "raftkube p50 / p90 / p99 ms",
    "etcd 3.6 p50 / p90 / p99 ms",
    "p99 ratio",
    "errors",
)
RIGHT = (False, True, True, True, True, True, True, True, True, True)
"""Which columns are right-aligned in the printed table (every figure)."""


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:,.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}x"


def _rate(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    if "failed" in row:
        return "FAILED"
    return f"{row['requests_per_s']:,.0f}"


def _latencies(row: dict[str, Any] | None) -> str:
    if row is None or "failed" in row:
        return "-"
    return " / ".join(_ms(row.get(k)) for k in ("p50_ms", "p90_ms", "p99_ms"))


def _figure(row: dict[str, Any] | None, key: str) -> float | None:
    return None if row is None or "failed" in row else row.get(key)


def rows(doc: dict[str, Any]) -> list[tuple[str, ...]]:
    """The table's rows (cells as text), workload by workload, level by level."""
    results = doc["results"]
    out: list[tuple[str, ...]] = []
    for workload in WORKLOADS:
        per = {s: results.get(s, {}).get(workload) for s in SYSTEMS}
        if all(v is None for v in per.values()):
            continue
        levels = sorted({r["clients"] for v in per.values() for r in v or []})
        for clients in levels:
            rk, et = (next((r for r in per[s] or [] if r["clients"] == clients), None) for s in SYSTEMS)
            conns = next((str(r["conns"]) for r in (rk, et) if r is not None), "-")
            errors = " / ".join("-" if r is None or "failed" in r else f"{r['errors']:,}" for r in (rk, et))
            out.append(
                (
                    workload,
                    str(clients),
                    conns,
                    _rate(rk),
                    _rate(et),
                    _ratio(_figure(rk, "requests_per_s"), _figure(et, "requests_per_s")),
                    _latencies(rk),
                    _latencies(et),
                    _ratio(_figure(rk, "p99_ms"), _figure(et, "p99_ms")),
                    errors,
                )
            )
    return out


def notes(doc: dict[str, Any]) -> list[str]:
    """What the figures are, the conditions they were taken in, and the machine's load."""
    m, cfg = doc["machine"], doc["config"]
    plan = cfg["plan"]
    shape = plan["shape"]
    start, end = m["load_average_at_start"], m.get("load_average_at_end") or [float("nan")] * 3
    sizing = (
        f"{plan['total']:,} requests per level (watch-latency: puts), no pilot"
        if plan["total"]
        else f"about {plan['seconds']:g} s per level, sized by a pilot of max(100, 8 x clients) requests "
        "(a run shorter than 60 % of that is run again, sized from its own rate)"
    )
    tls = "mutual TLS on client and peer ports" if cfg["tls"] else "no TLS"
    return [
        f"raftkube store benchmark through the etcd v3 API: {cfg['tool']} drives raftkube and etcd "
        f"{m.get('etcd36', '3.6')} with the same flags{', QUICK' if cfg['quick'] else ''}",
        f"{cfg['members']} members each on 127.0.0.1, fsync on, {tls}; --clients N --conns max(1, N/16), "
        "every connection to the leader (--target-leader); " + sizing,
        f"put and txn-put: --key-size {shape['key_size']} --val-size {shape['value_size']} "
        f"--key-space-size {shape['keyspace']} (put's keys random, txn-put's in turn, one put per txn); "
        f"range: one {shape['value_size']} B key written first; watch-latency: one watcher per client on one key, "
        f"{shape['watch_put_rate']} puts/s, req/s = events delivered per second, latency from each put's answer "
        "to each event (0 when the event came first)",
        f"machine: {m['cpu_model']}, {m['cores']} cores, commit {m['git_commit'][:12]}; load average (1, 5, 15 min) "
        f"{_load(start)} at the start, {_load(end)} at the end (the end's includes this run's own load)"
        + ("  << a busy machine at the start: these figures mislead" if start[0] > 0.5 * (m["cores"] or 1) else ""),
        "ratio = raftkube over etcd 3.6 (req/s: higher is better for raftkube; p99: lower is); "
        "errors = raftkube / etcd 3.6",
    ]


def _load(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def _targets(doc: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    out = []
    for t in doc["targets"]:
        value = "-" if t["value"] is None else f"{t['value']:.2f}{t['unit']}"
        met = "n/a (not measured)" if t["met"] is None else ("yes" if t["met"] else "NO")
        out.append((t["name"], t["goal"], value, met))
    return out


def render(doc: dict[str, Any]) -> str:
    """The table as printed: padded columns."""
    table = [HEADER, *rows(doc)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    lines = [*notes(doc), ""]
    for r in table:
        cells = [c.rjust(w) if right else c.ljust(w) for c, w, right in zip(r, widths, RIGHT, strict=True)]
        lines.append("  ".join(cells).rstrip())
    lines += ["", "TARGETS (raftkube through its etcd API, ratios to etcd 3.6 measured in this run)"]
    lines.append(f"{'target':<40}{'goal':>10}{'measured':>12}  met")
    for name, goal, value, met in _targets(doc):
        lines.append(f"{name:<40}{goal:>10}{value:>12}  {met}")
    for line in doc["config"].get("failed", []):
        lines.append(f"FAILED: {line}")
    return "\n".join(lines)


def markdown(doc: dict[str, Any]) -> str:
    """The same table as Markdown, for bench/results/store-etcd-api.md."""
    lines = ["# raftkube store benchmark: etcd API vs etcd 3.6", ""]
    lines += [f"- {n}" for n in notes(doc)]
    lines += ["", _md_row(HEADER), _md_row(tuple("---:" if r else "---" for r in RIGHT))]
    lines += [_md_row(r) for r in rows(doc)]
    lines += ["", "## Targets", "", _md_row(("target", "goal", "measured", "met")), "|---|---:|---:|---|"]
    lines += [_md_row(t) for t in _targets(doc)]
    failed = doc["config"].get("failed", [])
    if failed:
        lines += ["", "## Failed", "", *(f"- {f}" for f in failed)]
    return "\n".join(lines) + "\n"


def _md_row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
