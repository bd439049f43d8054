"""Load generators of a closed-loop round start together once each says it is ready
(bench.store.loadrun.start_together), with real generator processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bench.store import procs
from bench.store.loadrun import LoadError, LoadProcess, start_together, wait_until
from machinery.process.launch import free_ports


def _spec(**extra: Any) -> dict[str, Any]:
    # A member nobody serves: every write fails fast, which is all this needs of the load.
    endpoint = f"127.0.0.1:{free_ports(1)[0]}"
    return {"system": "raftkube", "endpoints": [endpoint], "mode": "write", "concurrency": 2, "timeout_s": 0.5} | extra


def test_the_generators_start_at_the_schedule_given_once_all_are_ready(tmp_path: Path) -> None:
    gens = [LoadProcess(_spec(barrier=True), tmp_path / f"gen-{i}.log") for i in range(2)]
    try:
        before = time.monotonic()
        t = start_together(gens, warmup=0.1, duration=0.3)
        assert before < t["t_start"] < t["t_measure"] < t["t_end"]
        assert t["t_measure"] - t["t_start"] == pytest.approx(0.1) and t["t_end"] - t["t_measure"] == pytest.approx(0.3)
        wait_until(t["t_end"])
        results = [g.result(timeout=30) for g in gens]
    finally:
        for g in gens:
            procs.kill(g.pid, wait=1.0)
    for r in results:  # each measured the window it was given (it began at or after t_measure)
        assert r["window_s"] == pytest.approx(0.3, abs=0.25), r
        assert r["ops"] == 0, r  # nobody answers


def test_a_generator_that_fails_before_it_is_ready_is_reported_with_its_error(tmp_path: Path) -> None:
    gens = [LoadProcess(_spec(barrier=True, system="nosuch"), tmp_path / "gen.log")]
    try:
        with pytest.raises(LoadError, match=r"ended before it was ready .*unknown system 'nosuch'"):
            start_together(gens, warmup=0.1, duration=0.1)
    finally:
        procs.kill(gens[0].pid, wait=1.0)


def test_a_generator_told_something_else_than_go_refuses_it(tmp_path: Path) -> None:
    g = LoadProcess(_spec(barrier=True), tmp_path / "gen.log")
    try:
        g.ready(time.monotonic() + 30)
        assert g.proc.stdin is not None
        g.proc.stdin.write(b"start now\n")
        g.proc.stdin.flush()
        with pytest.raises(LoadError, match="expected 'go T_START T_MEASURE T_END' on stdin, got 'start now'"):
            g.result(timeout=30)
    finally:
        procs.kill(g.pid, wait=1.0)
