"""The comparison with kube-apiserver (bench.apiserver.compare) from recorded figures: which
figures are compared, the ratio's direction, CPU per request, and the table."""

from __future__ import annotations

from typing import Any

import pytest

from bench.apiserver.compare import Row, render, rows

CREATES = {
    "raftkube": {"creates_per_s": 500.0, "p50_ms": 10.0, "p99_ms": 40.0, "apiserver_cpu_pct": 100.0,
                 "store_cpu_pct": 50.0, "errors": 0},
    "kube-apiserver": {"creates_per_s": 2000.0, "p50_ms": 5.0, "p99_ms": 20.0, "apiserver_cpu_pct": 80.0,
                       "store_cpu_pct": 40.0, "errors": 0},
}  # fmt: skip


def _row(table: list[Row], phase: str, figure: str) -> Row:
    return next(r for r in table if r.phase == phase and r.figure == figure)


def test_ratio_is_ours_over_theirs() -> None:
    table = rows({"creates": CREATES}, "raftkube")
    r = _row(table, "creates", "creates/s")
    assert (r.ours, r.theirs, r.ratio, r.higher_is_better) == (500.0, 2000.0, 0.25, True)
    assert _row(table, "creates", "create p99").ratio == 2.0


def test_cpu_per_request_is_cpu_time_over_requests() -> None:
    table = rows({"creates": CREATES}, "raftkube")
    ours = _row(table, "creates", "server CPU per create")
    # 100 % of a core at 500 creates/s = 2 ms a create; 80 % at 2,000/s = 0.4 ms
    assert ours.ours == pytest.approx(2.0) and ours.theirs == pytest.approx(0.4)
    assert ours.ratio == pytest.approx(5.0) and not ours.higher_is_better
    store = _row(table, "creates", "storage CPU per create")
    assert (store.ours, store.theirs) == (pytest.approx(1.0), pytest.approx(0.2))


def test_only_phases_both_ran_are_compared() -> None:
    phases: dict[str, Any] = {
        "creates": CREATES,
        "lists": {"raftkube": {"cache": {"p99_ms": 3.0}, "consistent": {"p99_ms": 9.0}}},
    }
    assert {r.phase for r in rows(phases, "raftkube")} == {"creates"}
    assert rows({"creates": {"raftkube": CREATES["raftkube"]}}, "raftkube") == []


def test_a_figure_missing_or_zero_on_their_side_has_no_ratio() -> None:
    theirs = CREATES["kube-apiserver"] | {"creates_per_s": 0.0}
    table = rows({"creates": {"raftkube": CREATES["raftkube"], "kube-apiserver": theirs}}, "raftkube")
    assert _row(table, "creates", "creates/s").ratio is None
    assert _row(table, "creates", "server CPU per create").theirs is None


def test_lists_compare_each_kind() -> None:
    one = {"p50_ms": 4.0, "p99_ms": 8.0, "apiserver_cpu_ms_per_list": 30.0}
    two = {"p50_ms": 2.0, "p99_ms": 4.0, "apiserver_cpu_ms_per_list": 10.0}
    phases = {
        "lists": {"raftkube": {"cache": one, "consistent": one}, "kube-apiserver": {"cache": two, "consistent": two}}
    }
    table = rows(phases, "raftkube")
    assert _row(table, "lists", "consistent server CPU per LIST").ratio == 3.0
    assert len(table) == 6


def test_render_puts_each_figure_on_a_line_with_its_ratio() -> None:
    lines = render(rows({"creates": CREATES}, "raftkube"), "raftkube")
    assert lines[0].startswith("RAFTKUBE VS KUBE-APISERVER")
    line = next(x for x in lines if "server CPU per create" in x)
    assert line.split()[-3:] == ["0.40", "5.00x", "<1"]
    assert "0.25x" in next(x for x in lines if x.startswith("creates    creates/s"))
    assert render([], "raftkube") == []


def test_to_json_carries_the_ratio() -> None:
    r = _row(rows({"creates": CREATES}, "raftkube"), "creates", "creates/s")
    assert r.to_json()["ratio"] == 0.25 and r.to_json()["theirs"] == 2000.0


def test_the_longest_figure_stays_apart_from_its_unit() -> None:
    """ "RSS per cached pod, 100,000 added" (33 characters) ran into its unit when the figure
    column was a fixed 32."""
    memory = {"bytes_per_pod_100000": 13_000.0}
    table = rows({"memory": {"raftkube": memory, "kube-apiserver": {"bytes_per_pod_100000": 26_000.0}}}, "raftkube")
    line = next(x for x in render(table, "raftkube") if "100,000 added" in x)
    assert line.split()[6:10] == ["added", "B", "13,000", "26,000"], line
