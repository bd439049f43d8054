"""Smoke tests of `raftkube bench store`: the smallest runs against etcd, checked for shape.

They start real clusters (raftkube and etcd, 3 members each, in plaintext and with mutual
TLS) and load generator processes, so they fail (never skip) when etcd or the bench extra is
missing: CI installs both.  The one against etcd 3.6 (`--peers etcd36`) needs it built by
`raftkube peers build --only etcd`: it has the `peers` marker, deselected by default.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT


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


def _bench(
    tmp_path: Path, *args: str, budget_s: float, peers: str = "etcd"
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run `raftkube bench store --quick --peers PEERS ARGS`; its result and JSON document."""
    _require_tools()
    out_json, out_png = tmp_path / "store.json", tmp_path / "store.png"
    argv = [sys.executable, "-m", "components.cli", "bench", "store", "--quick", "--peers", peers, *args]
    argv += ["--json", str(out_json), "--png", str(out_png)]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=2 * budget_s, check=False)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert elapsed < budget_s, f"the smoke run took {elapsed:.0f}s"
    assert out_png.stat().st_size > 1000
    doc: dict[str, Any] = json.loads(out_json.read_text())
    assert doc["config"]["failed_phases"] == {}
    return proc, doc


def test_quick_writes_against_etcd_with_and_without_tls(tmp_path: Path) -> None:
    proc, doc = _bench(tmp_path, "--only", "writes", "--levels", "1,16", "--seconds", "0.5", budget_s=90)
    assert "WRITES" in proc.stdout and "TARGETS" in proc.stdout and "TLS COST" in proc.stdout
    assert "writes:" in proc.stderr, "no progress display on stderr"

    assert doc["benchmark"] == "store"
    for key in ("cpu_model", "cores", "python", "etcd", "pysyncobj", "git_commit"):
        assert doc["machine"][key], key
    assert doc["machine"]["etcd"].startswith("3.")
    assert doc["config"]["systems"] == ["raftkube", "etcd"]
    assert doc["config"]["tls"] == "both"
    writes = doc["phases"]["writes"]
    assert writes["value_size"] == 256
    assert list(writes["systems"]) == ["raftkube", "etcd", "raftkube+tls", "etcd+tls"]
    for system in writes["systems"]:
        rows = writes["systems"][system]
        assert [r["concurrency"] for r in rows] == [1, 16]
        for r in rows:
            assert r["ops"] > 0 and r["ops_per_s"] > 0, (system, r)
            assert 0 < r["p50_ms"] <= r["p99_ms"], (system, r)
            assert r["client_cpu_pct"] > 0 and r["server_cpu_ms_per_op"] > 0, (system, r)
            assert r["errors"] == 0, (system, r)
    for system in ("raftkube", "etcd"):
        cost = writes["tls"][system]
        assert [r["concurrency"] for r in cost] == [1, 16]
        for r in cost:
            assert r["plain_ops_per_s"] > 0 and r["tls_ops_per_s"] > 0, (system, r)
            assert r["cost_pct"] == pytest.approx(100 * (1 - r["tls_ops_per_s"] / r["plain_ops_per_s"]))
    names = {t["name"]: t for t in doc["targets"]}
    assert names["p50 at 1 in flight"]["value"] > 0
    assert names["writes/s at 64 in flight vs etcd"]["met"] is None  # level not run
    assert names["TLS cost to writes/s at 256 in flight"]["met"] is None
    assert names["writes/s at 256 in flight with TLS vs etcd with TLS"]["met"] is None


def test_quick_slow_watchers(tmp_path: Path) -> None:
    """The slow-watcher phase, scaled down: 100 watchers of which 3 never read."""
    args = ("--only", "slow-watchers", "--seconds", "1", "--slow-watchers", "100,3")
    proc, doc = _bench(tmp_path, *args, budget_s=60)
    assert "SLOW WATCHERS" in proc.stdout
    sw = doc["phases"]["slow-watchers"]
    assert (sw["watchers"], sw["stalled"], sw["reading"], sw["tls"]) == (100, 3, 97, True)
    assert [r["stalled"] for r in sw["runs"]] == [0, 3]  # one pair in --quick, the baseline first
    for r in sw["runs"]:
        assert r["events"] > 0 and r["writes_per_s"] > 0, r
        assert r["write_errors"] == 0, r
        assert 0 < r["rss_idle_mib"] <= r["rss_peak_mib"], r
        assert r["member_cpu_pct"] > 0, r
    slow = sw["runs"][1]
    assert slow["stalled_connections"] == 3
    # They backed up before the others joined: the member's kernel send queue to each is not empty.
    assert all(q > 0 for q in slow["stalled_member_send_queue_at_join"]), slow
    assert sw["delivery_ratio"] > 0 and sw["rss_peak_mib"] == slow["rss_peak_mib"]
    names = {t["name"]: t for t in doc["targets"]}
    assert names["member RSS, 100 watchers of which 3 never read"]["value"] == sw["rss_peak_mib"]
    assert names["delivery to reading watchers, with vs without slow ones"]["value"] == sw["delivery_ratio"]


@pytest.mark.peers
def test_quick_writes_against_etcd36_beside_etcd(tmp_path: Path) -> None:
    """etcd 3.6 as `raftkube peers build` built it, beside Debian's 3.4, with and without TLS."""
    args = ("--only", "writes", "--levels", "1", "--seconds", "1")
    proc, doc = _bench(tmp_path, *args, budget_s=120, peers="etcd36,etcd")
    assert doc["config"]["systems"] == ["raftkube", "etcd36", "etcd"]
    assert doc["machine"]["etcd36"].startswith("3.6.") and doc["machine"]["etcd"].startswith("3.4.")
    assert doc["config"]["peers"]["etcd36"]["version"] == doc["machine"]["etcd36"]
    writes = doc["phases"]["writes"]
    assert set(writes["systems"]) == {"raftkube", "etcd36", "etcd", "raftkube+tls", "etcd36+tls", "etcd+tls"}
    for system in ("etcd36", "etcd36+tls"):
        (r,) = writes["systems"][system]
        assert r["ops"] > 0 and r["errors"] == 0 and 0 < r["p50_ms"] <= r["p99_ms"], (system, r)
        assert r["server_cpu_ms_per_op"] > 0, (system, r)  # the cluster's own pids were measured
    assert writes["tls"]["etcd36"][0]["tls_ops_per_s"] > 0
    assert "vs etcd36" in proc.stdout and "raftkube+tls / etcd36+tls writes/s" in proc.stdout
    names = {t["name"]: t for t in doc["targets"]}
    assert names["writes/s at 64 in flight vs etcd 3.6"]["met"] is None  # level not run


@pytest.mark.peers
def test_every_etcd_flag_the_bench_passes_is_in_both_releases_help(tmp_path: Path) -> None:
    """3.6 dropped the v2 store and capnslog and renamed the --experimental-* flags: the one
    command line both peers share must use only flags each release still lists."""
    from bench.store.peers import Etcd36Peer, EtcdPeer
    from bench.store.tls import etcd_pki

    _require_tools()
    for peer in (EtcdPeer(tmp_path, 3, tls=True), Etcd36Peer(tmp_path, 3, tls=True)):
        peer.member_tls, peer.client_tls = etcd_pki(peer.root, peer.ids)
        argv = peer._argv(1)
        help_text = subprocess.run([argv[0], "--help"], capture_output=True, text=True, timeout=30, check=False)
        listed = help_text.stdout + help_text.stderr
        for flag in {a.split("=", 1)[0] for a in argv[1:]}:
            assert f"  {flag} " in listed or f"  {flag}\n" in listed, (peer.name, flag)
