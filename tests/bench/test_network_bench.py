"""`raftkube bench network --quick`, end to end: private namespaces, the datapath both ways, a
real cluster and a raftkube proxy, then the figures checked for being there and sane (never for
being fast: figures are not pass/fail), and nothing left behind (namespaces, processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creates network namespaces: root only")


def _our_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("rkbn-")}


def test_quick_run_reports_both_paths_and_the_sync_latency() -> None:
    before = _our_namespaces()
    argv = [sys.executable, "-m", "components.cli", "bench", "network", "--quick", "--no-peer"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["benchmark"] == "network" and doc["failed"] == {}
    assert doc["machine"]["cores"] and len(doc["machine"]["load_average_at_start"]) == 3
    dp = doc["datapath"]
    for leg in ("direct", "service"):
        r = dp[leg]
        assert r["requests"] > 0 and r["rate_per_s"] > 0 and len(r["runs"]) == 2
        assert 0 < r["p50_ms"] <= r["p90_ms"] <= r["p99_ms"] <= r["max_ms"]
    assert dp["rate_ratio_service_to_direct"] > 0
    sync = doc["sync"]
    ours = sync["ours"]
    assert sync["services"] == 50 and ours["changes"] == 20
    assert ours["seen"] + ours["missed"] == 20 and ours["seen"] > 0
    assert 0 <= ours["p50_s"] <= ours["p99_s"] <= ours["max_s"] and len(ours["latencies_s"]) == ours["seen"]
    assert ours["own_metric"]["syncs"] > 0 and "kube_proxy" not in sync
    assert "DATAPATH" in proc.stdout and "SYNC" in proc.stdout and "TARGETS" in proc.stdout
    assert _our_namespaces() <= before  # every namespace it made is gone
