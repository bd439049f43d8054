"""Smoke test of `raftkube bench store`: the smallest run against etcd, checked for shape.

It starts real clusters (raftkube and etcd, 3 members each) and load generator processes,
so it fails (never skips) when etcd or the bench extra is missing: CI installs both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _require_tools() -> None:
    etcd = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)
    if etcd is None:
        pytest.fail(
            "etcd is not installed: the store benchmark compares against etcd 3.4 (apt-get install etcd-server)"
        )
    for module in ("grpc", "pysyncobj", "matplotlib"):
        try:
            __import__(module)
        except ImportError:
            pytest.fail(f"{module} is missing: install the bench extra (pip install -e '.[bench]')")


def test_quick_writes_against_etcd(tmp_path: Path) -> None:
    _require_tools()
    out_json, out_png = tmp_path / "store.json", tmp_path / "store.png"
    argv = [sys.executable, "-m", "components.cli", "bench", "store", "--quick", "--only", "writes"]
    argv += ["--peers", "etcd", "--levels", "1,16", "--seconds", "1", "--json", str(out_json), "--png", str(out_png)]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert elapsed < 60, f"the smoke run took {elapsed:.0f}s"
    assert "WRITES" in proc.stdout and "TARGETS" in proc.stdout
    assert "writes:" in proc.stderr, "no progress display on stderr"

    doc = json.loads(out_json.read_text())
    assert out_png.stat().st_size > 1000
    assert doc["benchmark"] == "store"
    for key in ("cpu_model", "cores", "python", "etcd", "pysyncobj", "git_commit"):
        assert doc["machine"][key], key
    assert doc["machine"]["etcd"].startswith("3.")
    assert doc["config"]["systems"] == ["raftkube", "etcd"]
    assert doc["config"]["failed_phases"] == {}
    writes = doc["phases"]["writes"]
    assert writes["value_size"] == 256
    for system in ("raftkube", "etcd"):
        rows = writes["systems"][system]
        assert [r["concurrency"] for r in rows] == [1, 16]
        for r in rows:
            assert r["ops"] > 0 and r["ops_per_s"] > 0, (system, r)
            assert 0 < r["p50_ms"] <= r["p99_ms"], (system, r)
            assert r["client_cpu_pct"] > 0 and r["server_cpu_ms_per_op"] > 0, (system, r)
            assert r["errors"] == 0, (system, r)
    names = {t["name"]: t for t in doc["targets"]}
    assert names["p50 at 1 in flight"]["value"] > 0
    assert names["writes/s at 64 in flight vs etcd"]["met"] is None  # level not run
