"""`raftkube bench startup`: a tiny real run (a store, an apiserver, the scheduler, the
controller-manager and hollow nodes, all processes) checked for its figures and for leaving
nothing running; its flag errors; the Lease gap arithmetic and the targets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.startup import report
from bench.startup.watch import LeaseWatch
from tests.bench.test_scheduler_bench import _processes_mentioning
from tests.support.paths import ROOT

COMMAND = [sys.executable, "-m", "components.cli", "bench", "startup"]


def test_tiny_run_starts_every_pod_and_leaves_nothing_running(tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    args = ["--pods", "20", "--nodes", "10", "--rate", "20", "--skip-up", "--lease-window", "11", "--json", str(out)]
    args += ["--png", str(tmp_path / "startup.png")]
    proc = subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    doc = json.loads(out.read_text())
    [case] = doc["cases"].values()
    assert case["complete"] and case["pods_running"] == 20 and len(case["latencies_ms"]) == 20
    assert 0 < case["p50_ms"] <= case["p99_ms"] <= case["max_ms"]
    assert case["lease"]["nodes_renewing"] == 10 and case["lease"]["max_gap_s"] is not None
    assert {"apiserver", "scheduler", "controller-manager", "hollow-nodes", "store (3 members)"} <= set(
        case["processes"]
    )
    assert [t["name"] for t in doc["targets"]] == [
        "start-up p99, 20x10@20",
        "10 hollow nodes Ready, Leases on time (20x10@20)",
    ]
    assert "TARGETS" in proc.stdout and (tmp_path / "startup.png").stat().st_size > 0
    # this checkout's processes only: another suite running on the machine has its own benches
    assert not [p for p in _processes_mentioning("raftkube-bench-startup-") if sys.executable in p]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--pods", "10"], "--pods and --nodes go together"),
        (["--pods", "10", "--nodes", "5", "--rate", "-1"], "--rate"),
        (["--pods", "0", "--nodes", "5"], "--pods"),
        (["--lease-window", "5"], "--lease-window: must be from 11 to 3600 seconds, got 5"),
    ],
)
def test_bad_flags_exit_2(args: list[str], says: str) -> None:
    proc = subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_lease_gaps_count_from_the_renewal_before_the_window() -> None:
    watch = LeaseWatch(client=None, prefix="h-")  # type: ignore[arg-type]
    watch.renewals["h-1"] = [95.0, 105.0, 115.0, 125.0]
    watch.renewals["h-2"] = [99.0, 121.0]  # missed one: a 22 s wait
    watch.renewals["h-3"] = [50.0]  # nothing in the window: it waited from 50 to the end
    assert watch.gaps(100.0, 130.0) == [10.0, 22.0, 80.0]


def test_targets() -> None:
    case = {
        "complete": True,
        "p99_ms": 4200.0,
        "nodes": 1000,
        "lease": {"nodes_renewing": 1000, "nodes_with_gap_over_15s": 0, "max_gap_s": 11.0},
        "processes": {"hollow-nodes": {"cpu_pct": 120.0, "peak_rss_mib": 600.0}},
    }
    got = {t.name: t.met for t in report.evaluate({"1000x1000@max": case}, {"nodes_ready_s": 12.0})}
    assert got == {
        "start-up p99, 1000x1000@max": True,
        "1,000 hollow nodes Ready, Leases on time (1000x1000@max)": True,
        "hollow-nodes CPU, 1,000 nodes": False,
        "hollow-nodes peak RSS, 1,000 nodes": True,
        "raftkube up to Ready nodes": False,
    }
