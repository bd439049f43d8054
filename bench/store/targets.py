"""The goals raftkube is measured against, as ratios to the peers measured in the same run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ETCDS = ("etcd", "etcd36")
"""The etcd releases raftkube is compared with: Debian's 3.4 and the 3.6 `raftkube peers build` builds."""
NAMES = {"etcd": "etcd", "etcd36": "etcd 3.6"}


@dataclass(frozen=True)
class Target:
    name: str
    goal: str
    value: float | None
    """The measured figure (a ratio or seconds); None when a phase or peer was not run."""
    met: bool | None
    unit: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "goal": self.goal, "value": self.value, "met": self.met, "unit": self.unit}


def _get(d: Any, *path: Any) -> Any:
    for p in path:
        if d is None:
            return None
        if isinstance(p, int) and isinstance(d, list):
            d = next((x for x in d if x.get("concurrency") == p or x.get("watchers") == p), None)
        else:
            d = d.get(p) if isinstance(d, dict) else None
    return d


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b:
        return None
    return a / b


def _check(name: str, goal: str, value: float | None, ok: Callable[[float], bool], unit: str = "x") -> Target:
    return Target(name, goal, value, None if value is None else bool(ok(value)), unit)


def _ran(phases: dict[str, Any], system: str) -> bool:
    """Whether any phase measured `system` (in plaintext or with TLS)."""
    return any(
        system in names or f"{system}+tls" in names
        for names in (_get(phase, "systems") or {} for phase in phases.values())
    )


def evaluate(phases: dict[str, Any]) -> list[Target]:
    """Every target, etcd 3.4's (n/a when not measured) each followed by etcd 3.6's when the
    run measured etcd 3.6 at all."""
    etcds = [e for e in ETCDS if e == "etcd" or _ran(phases, e)]
    w = _get(phases, "writes", "systems")
    out: list[Target] = []
    for level in (64, 256):
        rk = _get(w, "raftkube", level)
        for e in etcds:
            r = _ratio(_get(rk, "ops_per_s"), _get(w, e, level, "ops_per_s"))
            out.append(_check(f"writes/s at {level} in flight vs {NAMES[e]}", ">= 1.0x", r, lambda v: v >= 1.0))
        for e in etcds:
            p = _ratio(_get(rk, "p99_ms"), _get(w, e, level, "p99_ms"))
            out.append(_check(f"p99 at {level} in flight vs {NAMES[e]}", "<= 1.0x", p, lambda v: v <= 1.0))
    r = _ratio(_get(w, "raftkube", 256, "ops_per_s"), _get(w, "pysyncobj", 256, "ops_per_s"))
    out.append(_check("writes/s at 256 in flight vs pysyncobj", ">= 3.0x", r, lambda v: v >= 3.0))
    out.append(_check("p50 at 1 in flight", "<= 1.5 ms", _get(w, "raftkube", 1, "p50_ms"), lambda v: v <= 1.5, "ms"))
    cost = _get(phases, "writes", "tls", "raftkube", 256, "cost_pct")
    out.append(_check("TLS cost to writes/s at 256 in flight", "<= 20 %", cost, lambda v: v <= 20.0, "%"))
    for e in etcds:
        r = _ratio(_get(w, "raftkube+tls", 256, "ops_per_s"), _get(w, f"{e}+tls", 256, "ops_per_s"))
        name = f"writes/s at 256 in flight with TLS vs {NAMES[e]} with TLS"
        out.append(_check(name, ">= 1.0x", r, lambda v: v >= 1.0))
    ws = _get(phases, "watch", "systems")
    for e in etcds:
        r = _ratio(_get(ws, "raftkube", "fanout", 100, "events_per_s"), _get(ws, e, "fanout", 100, "events_per_s"))
        out.append(_check(f"watch events/s to 100 watchers vs {NAMES[e]}", ">= 1.0x", r, lambda v: v >= 1.0))
    for e in etcds:
        rk_c, et_c = _get(ws, "raftkube", "catchup"), _get(ws, e, "catchup")
        speed = None
        if rk_c and et_c and rk_c.get("complete") and et_c.get("complete"):
            speed = _ratio(et_c["seconds"], rk_c["seconds"])
        out.append(_check(f"watch catch-up speed vs {NAMES[e]}", ">= 10x", speed, lambda v: v >= 10.0))
    fo = _get(phases, "failover", "systems", "raftkube", "median_s")
    out.append(_check("failover median (kill leader -> first write)", "<= 1.5 s", fo, lambda v: v <= 1.5, "s"))
    rs = _get(phases, "restart", "systems", "raftkube", "restart_s")
    keys = _get(phases, "restart", "keys")
    label = f"restart of a {keys:,} x 1 KiB member until it serves" if keys else "restart until it serves"
    out.append(_check(label, "<= 5 s", rs, lambda v: v <= 5.0, "s"))
    sw = phases.get("slow-watchers")
    n, k = (sw["watchers"], sw["stalled"]) if sw else (1000, 10)
    rss = _get(sw, "rss_peak_mib")
    name = f"member RSS, {n:,} watchers of which {k} never read"
    out.append(_check(name, "< 512 MiB", rss, lambda v: v < 512, "MiB"))
    out.append(
        _check(
            "delivery to reading watchers, with vs without slow ones",
            ">= 0.80x",
            _get(sw, "delivery_ratio"),
            lambda v: v >= 0.8,
        )
    )
    return out


ETCD_API_WRITES = ("put", "txn-put")
"""The write workloads of `--api etcd` the targets judge (both are writes through the log)."""


def _level(results: dict[str, Any], system: str, workload: str, clients: int) -> dict[str, Any] | None:
    """`--api etcd`'s row of `system`'s `workload` at `clients` clients, if it ran."""
    rows = results.get(system, {}).get(workload, [])
    return next((r for r in rows if r.get("clients") == clients), None)


def _at_least_1(clean: bool) -> Callable[[float], bool]:
    return lambda v: clean and v >= 1.0


def _at_most_1(clean: bool) -> Callable[[float], bool]:
    return lambda v: clean and v <= 1.0


def evaluate_etcd_api(results: dict[str, Any]) -> list[Target]:
    """`--api etcd`'s targets: at 64 and 256 clients, raftkube's writes/s at least etcd 3.6's
    and its p99 no worse, for put and for txn-put, measured by the same tool in the same run.
    A raftkube level with errors meets no target: its rate counts only what succeeded."""
    out: list[Target] = []
    for workload in ETCD_API_WRITES:
        if workload not in results.get("raftkube", {}):
            continue
        for level in (64, 256):
            rk, et = _level(results, "raftkube", workload, level), _level(results, "etcd36", workload, level)
            clean = rk is not None and not rk.get("errors") and "failed" not in rk
            rate = _ratio(_get(rk, "requests_per_s"), _get(et, "requests_per_s"))
            p99 = _ratio(_get(rk, "p99_ms"), _get(et, "p99_ms"))
            out.append(_check(f"{workload}/s at {level} clients vs etcd 3.6", ">= 1.0x", rate, _at_least_1(clean)))
            out.append(_check(f"{workload} p99 at {level} clients vs etcd 3.6", "<= 1.0x", p99, _at_most_1(clean)))
    return out
