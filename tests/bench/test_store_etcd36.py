"""etcd 3.6 beside Debian's etcd 3.4 in `raftkube bench store` (`--peers etcd36`), without
running a cluster: the flag, the error when it is not built, the peer it makes and the
columns and targets it adds to the report.  The peers cache is pointed at an empty (or
faked) folder through XDG_CACHE_HOME, as machinery.process.peers reads it."""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from bench.store import cli, report, targets
from bench.store.peers import Etcd36Peer, EtcdPeer, PeerError, etcd36_binary, etcd36_version, make_peer
from bench.store.tls import etcd_pki
from machinery.process import peers

BUILD = "raftkube peers build --only etcd"


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    return p.parse_args(list(argv))


def _fake_etcd36(answer: str = f"etcd Version: {peers.ETCD_VERSION[1:]}") -> Path:
    """A script in the peers cache that `raftkube peers build` would have recorded as etcd 3.6."""
    path = peers.peer_path("etcd")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{answer}'\n")
    path.chmod(0o755)
    entry = {"peer": "etcd", "version": peers.ETCD_VERSION, "source": "x", "built_at": "", "build_seconds": 0.0,
             "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "go": "go", "reports": answer}  # fmt: skip
    (path.parent / "manifest.json").write_text(json.dumps({"peers": {"etcd": entry}}))
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ---------------------------------------------------------------------- the flag
def test_peers_takes_etcd36_beside_etcd() -> None:
    assert _parse("--peers", "etcd36,etcd").peers == ["etcd36", "etcd"]
    assert _parse().peers == ["etcd", "pysyncobj"]  # the default run is unchanged


def test_an_unknown_peer_is_refused_naming_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        _parse("--peers", "etcd35")
    assert e.value.code == 2
    assert "unknown peer: etcd35 (known: etcd, etcd36, pysyncobj)" in capsys.readouterr().err


# ---------------------------------------------------------------------- not built
def test_a_missing_etcd36_is_an_error_naming_the_build_command(cache: Path) -> None:
    with pytest.raises(PeerError) as e:
        etcd36_binary()
    assert BUILD in str(e.value) and "missing" in str(e.value)
    with pytest.raises(PeerError, match=BUILD):
        make_peer("etcd36", cache, 3)
    assert etcd36_version() == "not built"


def test_the_run_ends_with_exit_1_before_anything_starts(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = tmp_path / "out"
    # The smallest run, so that a regression (a run that goes on without etcd36) stays short.
    small = ["--quick", "--only", "writes", "--levels", "1", "--seconds", "1", "--tls", "off"]
    code = cli.main(["--peers", "etcd,etcd36", *small, "--json", str(out / "s.json"), "--png", str(out / "s.png")])
    assert code == 1
    assert BUILD in capsys.readouterr().err
    assert not out.exists() and not any(scratch.iterdir())  # no results, no cluster dir


# ---------------------------------------------------------------------- the peer
def test_etcd36_runs_the_built_binary_with_the_same_flags_and_tls(cache: Path, tmp_path: Path) -> None:
    path = _fake_etcd36()
    new, old = Etcd36Peer(tmp_path, 3, tls=True), EtcdPeer(tmp_path, 3, tls=True)
    for p in (new, old):
        p.member_tls, p.client_tls = etcd_pki(p.root, p.ids)
    assert new.label == "etcd36+tls" and new.root == tmp_path / "etcd36+tls"
    argv = new._argv(2)
    assert argv[0] == str(path) and old._argv(2)[0] != str(path)
    flags = [a.split("=", 1)[0] for a in argv[1:]]
    assert flags == [a.split("=", 1)[0] for a in old._argv(2)[1:]]
    assert "--client-cert-auth" in flags and "--peer-client-cert-auth" in flags
    assert f"--listen-client-urls=https://127.0.0.1:{new.client_ports[2]}" in argv
    # Its load generators and probes speak etcd's v3 API, as for 3.4.
    assert new.client_spec()["system"] == "etcd" and new.client_spec()["tls"]["cert"]


def test_etcd36_reports_what_its_binary_answers(cache: Path, tmp_path: Path) -> None:
    _fake_etcd36()
    assert etcd36_version() == peers.ETCD_VERSION[1:]
    d = make_peer("etcd36", tmp_path, 3).describe()
    assert d["version"] == peers.ETCD_VERSION[1:]
    assert d["snapshot_count"] == 10_000  # 3.6's default; 3.4's is 100,000


# ---------------------------------------------------------------------- the report
def _row(level: int, ops: float, p99: float = 2.0) -> dict[str, Any]:
    return {"concurrency": level, "ops_per_s": ops, "p50_ms": 1.0, "p99_ms": p99, "client_cpu_pct": 10.0,
            "server_cpu_pct": 50.0, "server_cpu_ms_per_op": 0.1, "errors": 0}  # fmt: skip


def _doc(systems: dict[str, float]) -> dict[str, Any]:
    phases = {
        "writes": {"value_size": 256, "seconds": 1.0, "systems": {s: [_row(256, v)] for s, v in systems.items()}},
        "restart": {"keys": 10, "value_size": 1024, "systems": {s: {"restart_s": 1000 / v, "rss_mib": {"m1": 1.0},
                    "rss_restarted_mib": 1.0, "fill_writes_per_s": 1.0, "fill_server_cpu_ms_per_write": 1.0}
                    for s, v in systems.items()}},
    }  # fmt: skip
    machine = {"cpu_model": "x", "cores": 2, "python": "3", "etcd": "3.4.23", "etcd36": "3.6.17",
               "pysyncobj": "0.3", "git_commit": "abc", "load_average_at_start": [0.0, 0.0, 0.0]}  # fmt: skip
    config = {"members": 3, "quick": True, "tls": "off", "systems": list(systems)}
    return report.document(config, machine, phases, targets.evaluate(phases))


def test_the_report_has_a_ratio_to_etcd36_beside_the_ratio_to_etcd() -> None:
    doc = _doc({"raftkube": 3000.0, "etcd": 1500.0, "etcd36": 2000.0})
    text = report.render(doc)
    assert "etcd 3.4.23, etcd36 3.6.17" in text
    writes = text.split("WRITES", 1)[1].splitlines()
    assert writes[1].split()[:5] == ["in", "flight", "system", "writes/s", "vs"]
    assert "vs etcd  vs etcd36" in writes[1]
    raftkube = next(line for line in writes if " raftkube " in line)
    assert "2.00x" in raftkube and "1.50x" in raftkube  # 3000 / 1500, 3000 / 2000
    assert "x" not in next(line for line in writes if " etcd36 " in line).replace("etcd36", "")
    restart = text.split("RESTART", 1)[1]
    assert "vs etcd36" in restart and "0.67x" in restart  # raftkube's 0.33 s over etcd36's 0.5 s
    names = {t["name"]: t["value"] for t in doc["targets"]}
    assert names["writes/s at 256 in flight vs etcd"] == 2.0
    assert names["writes/s at 256 in flight vs etcd 3.6"] == 1.5


def test_without_etcd36_the_report_is_as_before() -> None:
    doc = _doc({"raftkube": 3000.0, "etcd": 1500.0})
    text = report.render(doc)
    assert "etcd36" not in text and "etcd 3.6" not in text
    assert not [t for t in doc["targets"] if "3.6" in t["name"]]
