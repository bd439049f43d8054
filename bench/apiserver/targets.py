"""The apiserver's goals, checked for each backend measured (and raftkube against etcd)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.apiserver.phases.custom import ratios
from bench.store.targets import Target


def _check(name: str, goal: str, value: float | None, ok: Callable[[float], bool], unit: str = "") -> Target:
    return Target(name, goal, value, None if value is None else bool(ok(value)), unit)


def _get(d: Any, *path: str) -> Any:
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


def evaluate(phases: dict[str, Any], backends: list[str]) -> list[Target]:
    out: list[Target] = []
    for b in backends:
        fan = _get(phases, "fanout", b)
        complete = None if fan is None else 100.0 * fan["delivered_fraction"]
        all_there = fan is not None and fan["events_missing"] == 0 and fan["pods_created"] > 0
        out.append(
            Target(
                f"{b}: fan-out, every watcher gets every matching event",
                "100 %",
                complete,
                None if fan is None else all_there,
                "%",
            )
        )
        out.append(_check(f"{b}: fan-out delivery p99", "<= 500 ms", _get(fan, "p99_ms"), lambda v: v <= 500, "ms"))
        eps = _get(phases, "throughput", b, "events_per_s")
        n = _get(phases, "throughput", b, "watchers") or 100
        out.append(_check(f"{b}: events/s to {n} watchers", ">= 100,000", eps, lambda v: v >= 100_000, "/s"))
        for kind in ("cache", "consistent"):
            p99 = _get(phases, "lists", b, kind, "p99_ms")
            items = _get(phases, "lists", b, kind, "items")
            what = f"LIST of {items:,} pods" if items else "LIST of pods"
            out.append(_check(f"{b}: {what}, {kind}, p99", "<= 500 ms", p99, lambda v: v <= 500, "ms"))
        cps = _get(phases, "creates", b, "creates_per_s")
        out.append(_check(f"{b}: creates/s at 64 in flight", ">= 2,000", cps, lambda v: v >= 2000, "/s"))
        p99 = _get(phases, "creates", b, "p99_ms")
        out.append(_check(f"{b}: create p99 at 64 in flight", "<= 100 ms", p99, lambda v: v <= 100, "ms"))
        custom = ratios(phases, b)
        for figure, what in (("creates_per_s", "creates/s"), ("events_per_s", "watch events/s")):
            out.append(
                _check(f"{b}: custom resource {what} vs pods'", ">= 0.8x", custom[figure], lambda v: v >= 0.8, "x")
            )
    cost = _get(phases, "gates", "raftkube", "gates_cost")
    out.append(
        _check(
            "raftkube: throughput the gates cost (RBAC user, quota, limits, PodSecurity)",
            "<= 25 %",
            None if cost is None else 100 * cost,
            lambda v: v <= 25,
            "%",
        )
    )
    hook = _get(phases, "gates", "raftkube", "webhook_p50_ms")
    out.append(_check("raftkube: p50 a webhook adds to a create", "<= 2 ms", hook, lambda v: v <= 2, "ms"))
    rk, et = _get(phases, "creates", "raftkube", "creates_per_s"), _get(phases, "creates", "etcd", "creates_per_s")
    ratio = rk / et if rk is not None and et else None
    out.append(_check("raftkube: creates/s vs the same apiserver on etcd", ">= 1.0x", ratio, lambda v: v >= 1.0, "x"))
    return out
