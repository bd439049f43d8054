"""Smoke test of `raftkube bench apiserver`: the smallest run over raftkube, checked for shape.

It starts a real store (3 members) and apiserver, and load generator processes; it fails
(never skips) when the bench extra (matplotlib) is missing: CI installs it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT


def _numbers(d: dict[str, Any], *keys: str) -> None:
    for k in keys:
        assert isinstance(d[k], int | float) and d[k] >= 0, (k, d[k])


def test_quick_run_over_raftkube(tmp_path: Path) -> None:
    try:
        __import__("matplotlib")
    except ImportError:
        pytest.fail("matplotlib is missing: install the bench extra (pip install -e '.[bench]')")
    out_json, out_png = tmp_path / "apiserver.json", tmp_path / "apiserver.png"
    argv = [sys.executable, "-m", "components.cli", "bench", "apiserver", "--quick", "--storage", "raftkube"]
    argv += ["--watchers", "20", "--pods", "200", "--rate", "200", "--seconds", "0.5"]
    argv += ["--json", str(out_json), "--png", str(out_png)]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert elapsed < 120, f"the smoke run took {elapsed:.0f}s"
    assert "fan-out:" in proc.stderr, "no progress display on stderr"
    titles = (
        "WATCH FAN-OUT",
        "WATCH THROUGHPUT",
        "LIST of every pod",
        "POD CREATES",
        "CUSTOM RESOURCES",
        "THE GATES",
        "(g) MEMORY",
    )
    for title in (*titles, "TARGETS"):
        assert title in proc.stdout, title
    assert out_png.stat().st_size > 1000

    doc: dict[str, Any] = json.loads(out_json.read_text())
    assert doc["benchmark"] == "apiserver"
    assert doc["config"]["failed_phases"] == {}
    assert doc["config"]["storage"] == ["raftkube"]
    for key in ("cpu_model", "cores", "python", "git_commit", "load_average_at_start", "load_average_at_end"):
        assert doc["machine"][key], key
    assert doc["machine"]["packages"]["uvicorn"]
    ph = doc["phases"]
    assert set(ph) == {"client", "fanout", "throughput", "lists", "creates", "custom", "gates", "memory"}
    memory = ph["memory"]["raftkube"]
    # --pods 200: 200 and then 1,000 pods added to those the other phases left, RSS read at each
    assert [st["added"] for st in memory["steps"]] == [200, 1000], memory
    assert [st["pods"] for st in memory["steps"]] == [memory["start_pods"] + 200, memory["start_pods"] + 1000]
    assert memory["start_rss_mib"] > 0 and memory["steps"][-1]["rss_mib"] > memory["start_rss_mib"]
    assert 0 < memory["bytes_per_pod_1000"] < 1_000_000, memory

    clients = ph["client"]["clients"]
    for name in ("raw_asyncio", "httpx"):
        _numbers(clients[name], "requests_per_s", "client_cpu_ms_per_request")
        assert clients[name]["requests_per_s"] > 0

    fan = ph["fanout"]["raftkube"]
    assert fan["watchers"] == 20 + 10 and fan["watchers_opened"] == 30
    assert fan["pods_scheduled"] == 200 and fan["pods_created"] > 0
    assert fan["events_expected"] == fan["pods_created"] * 11  # its node's watcher + 10 unfiltered
    # every created pod reaches its node's watcher and every unfiltered one (the phase's contract)
    assert fan["events_delivered"] == fan["events_expected"] and fan["events_missing"] == 0, fan
    assert fan["watchers_complete"] == fan["watchers"], fan
    _numbers(fan, "p50_ms", "p99_ms", "writes_per_s", "apiserver_cpu_pct", "store_cpu_pct")
    assert 0 < fan["p50_ms"] <= fan["p99_ms"]

    thr = ph["throughput"]["raftkube"]
    assert thr["watchers"] == 20 and thr["watchers_opened"] == 20
    assert thr["events"] > 0 and thr["events_per_s"] > 0 and thr["writes_per_s"] > 0

    lists = ph["lists"]["raftkube"]
    for kind in ("cache", "consistent"):
        k = lists[kind]
        assert k["ok"] == lists["requests"] >= 20 and k["errors"] == 0, k
        assert k["items"] >= 200
        assert 0 < k["p50_ms"] <= k["p99_ms"]

    cr = ph["creates"]["raftkube"]
    assert cr["creates"] > 0 and cr["creates_per_s"] > 0 and cr["errors"] == 0
    assert 0 < cr["p50_ms"] <= cr["p99_ms"]

    custom = ph["custom"]["raftkube"]  # a CRD's widgets, created and watched like the pods
    assert custom["creates"]["creates_per_s"] > 0 and custom["creates"]["errors"] == 0, custom["creates"]
    assert custom["throughput"]["events_per_s"] > 0 and custom["throughput"]["watchers_opened"] == 20
    assert "custom resource creates/s vs pods'" in proc.stdout

    gates = ph["gates"]["raftkube"]
    for key in ("off@64", "on@64", "hook@64", "off@1", "on@1", "hook@1"):
        row = gates["rows"][key]
        assert row["creates"] > 0 and row["errors"] == 0, (key, row)
        assert row["rounds"] == len(row["creates_per_s_by_round"]) == 1  # quick: each chain once (full: ABBA)
        roles = {"apiserver", "other apiservers", "store"} | ({"webhook"} if key.startswith("hook") else set())
        assert set(row["cpu_ms_per_create"]) == roles, (key, row)
        assert row["cpu_ms_per_create"]["apiserver"] > 0 and min(row["cpu_ms_per_create"].values()) >= 0, (key, row)
    for key in ("on", "hook"):  # paired rounds: each chain took every other create
        assert gates["paired"][key]["creates"] > 0 and gates["paired"][key]["p50_ms"] > 0, gates["paired"]
    # differences of two measurements: finite, of either sign (a webhook's cost can hide in the noise)
    assert all(math.isfinite(gates[k]) for k in ("gates_cost", "webhook_p50_ms", "webhook_p50_ms_separate_rounds")), (
        gates
    )

    names = {t["name"]: t for t in doc["targets"]}
    assert names["raftkube: create p99 at 64 in flight"]["value"] == cr["p99_ms"]
    assert names["raftkube: creates/s vs the same apiserver on etcd"]["met"] is None  # etcd not run


def test_watchers_over_http2_share_connections_and_miss_nothing(tmp_path: Path) -> None:
    """--http2: each watcher process holds its watches as streams of one HTTP/2 connection (the
    apiserver's ALPN takes h2), and fan-out still delivers every event to every watcher."""
    out_json = tmp_path / "apiserver.json"
    argv = [sys.executable, "-m", "components.cli", "bench", "apiserver", "--quick", "--storage", "raftkube"]
    argv += ["--only", "fanout,throughput", "--http2", "--watchers", "30", "--pods", "200", "--rate", "200"]
    argv += ["--seconds", "0.5", "--json", str(out_json), "--png", str(tmp_path / "apiserver.png")]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    doc: dict[str, Any] = json.loads(out_json.read_text())
    assert doc["config"]["sizes"]["watch_http2"] is True
    fan, thr = doc["phases"]["fanout"]["raftkube"], doc["phases"]["throughput"]["raftkube"]
    assert fan["watchers_opened"] == 30 + 10 and fan["watch_connections"] == 2, fan  # 2 load generator processes
    assert fan["events_delivered"] == fan["events_expected"] and fan["events_missing"] == 0, fan
    assert thr["watchers_opened"] == 30 and thr["watch_connections"] == 2 and thr["watchers_failed"] == 0, thr
    assert thr["events_per_s"] > 0
