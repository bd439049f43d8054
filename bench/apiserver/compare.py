"""Our apiserver against kube-apiserver, figure by figure, from a run's recorded phases.

Each figure both sides measured becomes a row: ours, theirs, and the ratio ours ÷ theirs,
with which way is better (a rate wants a ratio above 1, a latency or a cost below 1).  CPU
per request is the server's process CPU time over the measured window (/proc/<pid>/stat,
bench.store.procs) divided by the requests it served in that window: for the write phases
`cpu % ÷ 100 ÷ requests/s`, for LISTs the figure the phase recorded.  Pure: it reads the
phases' dicts and nothing else, so recorded results can be compared again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

THEIRS = "kube-apiserver"


@dataclass(frozen=True)
class Row:
    phase: str
    figure: str
    unit: str
    higher_is_better: bool
    ours: float | None
    theirs: float | None

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.theirs is None or self.theirs == 0:
            return None
        return self.ours / self.theirs

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"ratio": self.ratio}


def _get(d: Any, *path: str) -> float | None:
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return float(d) if isinstance(d, int | float) and not isinstance(d, bool) else None


def _per_request(cpu_key: str, rate_key: str) -> Callable[[dict[str, Any]], float | None]:
    """ms of one process's CPU per request: (cpu % / 100) cores / (requests/s) x 1000."""

    def ms(r: dict[str, Any]) -> float | None:
        cpu, rate = _get(r, cpu_key), _get(r, rate_key)
        return None if cpu is None or not rate else 10.0 * cpu / rate

    return ms


def _at(*path: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda r: _get(r, *path)


FIGURES: dict[str, list[tuple[str, str, bool, Callable[[dict[str, Any]], float | None]]]] = {
    "fanout": [
        ("creates/s (open loop)", "/s", True, _at("writes_per_s")),
        ("events missing", "", False, _at("events_missing")),
        ("delivery p50", "ms", False, _at("p50_ms")),
        ("delivery p99", "ms", False, _at("p99_ms")),
        ("watches open", "s", False, _at("watch_open_s")),
        ("server CPU per create", "ms", False, _per_request("apiserver_cpu_pct", "writes_per_s")),
        ("storage CPU per create", "ms", False, _per_request("store_cpu_pct", "writes_per_s")),
        ("server RSS", "MiB", False, _at("apiserver_rss_mib")),
    ],
    "throughput": [
        ("events/s", "/s", True, _at("events_per_s")),
        ("creates/s", "/s", True, _at("writes_per_s")),
        ("create p99", "ms", False, _at("create", "p99_ms")),
        ("server CPU per create", "ms", False, _per_request("apiserver_cpu_pct", "writes_per_s")),
        ("storage CPU per create", "ms", False, _per_request("store_cpu_pct", "writes_per_s")),
    ],
    "lists": [
        (f"{kind} {what}", unit, False, _at(kind, key))
        for kind in ("cache", "consistent")
        for what, unit, key in (
            ("LIST p50", "ms", "p50_ms"),
            ("LIST p99", "ms", "p99_ms"),
            ("server CPU per LIST", "ms", "apiserver_cpu_ms_per_list"),
        )
    ],
    "creates": [
        ("creates/s", "/s", True, _at("creates_per_s")),
        ("create p50", "ms", False, _at("p50_ms")),
        ("create p99", "ms", False, _at("p99_ms")),
        ("server CPU per create", "ms", False, _per_request("apiserver_cpu_pct", "creates_per_s")),
        ("storage CPU per create", "ms", False, _per_request("store_cpu_pct", "creates_per_s")),
        ("errors", "", False, _at("errors")),
    ],
    "memory": [
        (f"RSS per cached pod, {pods:,} added", "B", False, _at(f"bytes_per_pod_{pods}"))
        for pods in (1_000, 5_000, 10_000, 100_000)
    ],
    "custom": [
        ("custom resource creates/s", "/s", True, _at("creates", "creates_per_s")),
        ("custom resource create p99", "ms", False, _at("creates", "p99_ms")),
        ("custom resource watch events/s", "/s", True, _at("throughput", "events_per_s")),
    ],
}


def rows(phases: dict[str, Any], ours: str, theirs: str = THEIRS) -> list[Row]:
    """Every figure of every phase both `ours` and `theirs` ran."""
    out: list[Row] = []
    for phase, figures in FIGURES.items():
        per = phases.get(phase)
        if not isinstance(per, dict) or not isinstance(per.get(ours), dict) or not isinstance(per.get(theirs), dict):
            continue
        for figure, unit, higher, read in figures:
            row = Row(phase, figure, unit, higher, read(per[ours]), read(per[theirs]))
            if row.ours is not None or row.theirs is not None:  # a figure neither side has is left out
                out.append(row)
    return out


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "/s" or abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.2f}"


def render(table: list[Row], ours: str, theirs: str = THEIRS) -> list[str]:
    """The table's lines (none when nothing was compared)."""
    if not table:
        return []
    fw = 1 + max(len("figure"), *(len(r.figure) for r in table))  # "RSS per cached pod, 100,000 added" is 33
    lines = [
        f"{ours.upper()} VS {theirs.upper()} (ratio = {ours} / {theirs}; better: which way the ratio should go;"
        " CPU per request = process CPU over the phase / requests)",
        f"{'phase':<11}{'figure':<{fw}}{'unit':<5}{ours:>12}{theirs:>16}{'ratio':>9}  better",
    ]
    for r in table:
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x"
        lines.append(
            f"{r.phase:<11}{r.figure:<{fw}}{r.unit:<5}{_value(r.ours, r.unit):>12}{_value(r.theirs, r.unit):>16}"
            f"{ratio:>9}  {'>1' if r.higher_is_better else '<1'}"
        )
    return lines
