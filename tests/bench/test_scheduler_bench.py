"""`raftkube bench scheduler`: a tiny real run checked for its figures and for leaving nothing
running, its flag errors, and the pure parts (histogram quantiles, the py-spy summary).

The run starts a real store (3 members), an apiserver and the scheduler process; it fails
(never skips) when the bench extra (matplotlib) is missing: CI installs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.scheduler import histogram
from bench.scheduler.profile import summarise
from tests.support.paths import ROOT

COMMAND = [sys.executable, "-m", "components.cli", "bench", "scheduler"]


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that mention `text` (their data dirs, kubeconfig)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def test_tiny_run_binds_every_pod_and_leaves_nothing_running(tmp_path: Path) -> None:
    try:
        __import__("matplotlib")
    except ImportError:
        pytest.fail("matplotlib is missing: install the bench extra (pip install -e '.[bench]')")
    out_json, out_png = tmp_path / "scheduler.json", tmp_path / "scheduler.png"
    work = tmp_path / "work"
    work.mkdir()
    argv = [*COMMAND, "--nodes", "3", "--pods", "30", "--json", str(out_json), "--png", str(out_png)]
    env = os.environ | {"TMPDIR": str(work)}  # the run's temp dir, so its processes can be found by path
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert elapsed < 60, f"the tiny run took {elapsed:.0f}s"
    assert _processes_mentioning(str(work)) == [], "processes of the run still running"
    assert "30 pods on 3 nodes" in proc.stderr, "no progress display on stderr"
    assert "TARGETS" in proc.stdout and "pods/s" in proc.stdout
    assert out_png.stat().st_size > 1000

    doc: dict[str, Any] = json.loads(out_json.read_text())
    assert doc["benchmark"] == "scheduler"
    assert doc["config"]["failed_cases"] == {}
    assert doc["config"]["cases"] == [[30, 3]]
    for key in ("cpu_model", "cores", "python", "git_commit", "load_average_at_start", "load_average_at_end"):
        assert doc["machine"][key], key
    assert doc["machine"]["packages"]["aiohttp"]
    (case,) = doc["cases"].values()
    assert case["complete"] and case["outcome"] == "complete"
    assert case["pods_bound"] == 30 and case["pods_unbound_by_list"] == 0
    assert case["pods_per_node"]["nodes_used"] >= 2  # least-allocated scoring spreads them
    assert case["pods_per_s"] > 0 and case["window_s"] > 0
    assert 0 < case["p50_ms"] <= case["p99_ms"] <= case["max_ms"]
    assert case["e2e_histogram"]["count"] == 30
    assert case["attempts"]["scheduled"] == 30
    assert case["scheduler_cpu_s"] > 0 and case["scheduler_cpu_ms_per_pod"] > 0
    assert case["scheduler_startup_cpu_s"] > 0 and case["startup_s"] > 0
    assert case["scheduler_peak_rss_mib"] >= case["scheduler_rss_synced_mib"] > 10
    assert case["timeline"][0] == [0.0, 0] and case["timeline"][-1][1] == 30
    # only the 1,000-node rows carry the goal
    (target,) = doc["targets"]
    assert target["value"] is None and target["met"] is None


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--nodes", "0", "--pods", "5"], "--nodes"),
        (["--nodes", "3", "--pods", "many"], "--pods"),
        (["--pods", "-1"], "--pods"),
        (["--quick", "--nodes"], "--nodes"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(args: list[str], flag: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [*COMMAND, *args, "--json", str(tmp_path / "x.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert flag in proc.stderr, proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_cases_of_the_full_and_the_quick_run() -> None:
    from argparse import ArgumentParser

    from bench.scheduler.cli import add_arguments, cases_of

    p = ArgumentParser()
    add_arguments(p)
    assert cases_of(p.parse_args([])) == [(1000, 100), (1000, 1000), (10_000, 100), (10_000, 1000)]
    assert cases_of(p.parse_args(["--quick"])) == [(1000, 100), (1000, 1000)]
    assert cases_of(p.parse_args(["--nodes", "7", "--pods", "9"])) == [(9, 7)]
    assert cases_of(p.parse_args(["--quick", "--nodes", "50"])) == [(1000, 50)]


def test_histogram_quantiles_as_prometheus_estimates_them() -> None:
    text = """# HELP h x
# TYPE h histogram
h_bucket{le="0.1"} 0.0
h_bucket{le="1.0"} 50.0
h_bucket{le="10.0"} 100.0
h_bucket{le="+Inf"} 100.0
h_count 100.0
c_total{result="scheduled",profile="default-scheduler"} 7.0
c_total{result="error",profile="default-scheduler"} 1.0
"""
    samples = histogram.parse(text)
    b = histogram.buckets(samples, "h")
    assert histogram.quantile(0.5, b) == pytest.approx(1.0)
    assert histogram.quantile(0.25, b) == pytest.approx(0.55)  # halfway into (0.1, 1.0]
    assert histogram.quantile(0.99, b) == pytest.approx(1.0 + 9.0 * 49 / 50)
    assert histogram.quantile(0.5, []) is None
    overflow = [(1.0, 1.0), (float("inf"), 10.0)]
    assert histogram.quantile(0.99, overflow) == 1.0  # in +Inf: the highest finite bound
    assert histogram.value(samples, "c_total", result="scheduled") == 7.0
    assert histogram.value(samples, "c_total") == 8.0


def test_profile_summary_counts_our_frames_not_the_entry_points() -> None:
    raw = (
        "<module> (/work/main/components/scheduler/__main__.py:7);"
        "_loop (/work/main/components/scheduler/scheduler.py:170);"
        "schedule (/work/main/components/scheduler/framework.py:120);"
        "least_allocated (/work/main/components/scheduler/plugins/noderesources.py:50) 30\n"
        "<module> (/work/main/components/scheduler/__main__.py:7);"
        "_run_once (/usr/lib/python3.11/asyncio/base_events.py:1900);"
        "read (/x/site-packages/aiohttp/streams.py:10) 10\n"
    )
    s = summarise(raw, seconds=1.0)
    assert s["samples"] == 40
    assert s["self"][0] == {"frame": "least_allocated (components/scheduler/plugins/noderesources.py)", "pct": 75.0}
    inclusive = {f["frame"]: f["pct"] for f in s["inclusive"]}
    assert inclusive["schedule (components/scheduler/framework.py)"] == 75.0
    assert not any("__main__" in f for f in inclusive)
