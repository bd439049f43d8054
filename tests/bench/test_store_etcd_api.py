"""`raftkube bench store --api etcd`: raftkube's etcd API beside etcd 3.6, both driven by etcd's
own load tool.  The fast tests read the tool's real output (recorded in data/etcd_benchmark/
from runs against both systems: put, range, watch-latency, a run with too few requests for a
p99, one answered only with errors), check its command lines, the sizing of each level (against
a fake tool), the table, the targets, and the exit before anything starts when a peer is not
built.  The smoke test runs `--api etcd --quick` end to end with tiny totals; it needs etcd 3.6
and etcd-benchmark built, so it has the `peers` marker (deselected by default).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from bench.store import cli, etcd_api_report, etcd_tool, targets
from bench.store.etcd_tool import PERCENTILES, Shape, conns_for, parse
from bench.store.tls import ClientTLS
from machinery.process import peers
from tests.support.paths import ROOT

DATA = Path(__file__).parent / "data" / "etcd_benchmark"


def _sample(name: str) -> str:
    return (DATA / name).read_text()


# ---------------------------------------------------------------------- the tool's output
def test_a_put_report() -> None:
    """raftkube, 200 puts from one client with mutual TLS."""
    (s,) = parse(_sample("put-raftkube-1-client.out")).values()
    assert (s.requests, s.errors, s.error_kinds) == (200, 0, {})
    assert s.requests_per_s == pytest.approx(396.38391873)
    assert s.total_s == pytest.approx(0.504561337)
    assert s.p50_ms == pytest.approx(2.056044) and s.p90_ms == pytest.approx(4.170481)
    assert s.p99_ms == pytest.approx(8.170754)
    assert s.fastest_ms == pytest.approx(1.303357) and s.slowest_ms == pytest.approx(9.011727)
    assert s.percentiles_ms["99.9"] is None  # 200 requests: too few for it, the tool leaves it out
    assert list(s.percentiles_ms) == list(PERCENTILES)


def test_a_range_report_after_its_banner() -> None:
    """etcd 3.6, 16 clients: the "bench with linearizable range" line before the report is no report."""
    reports = parse(_sample("range-linearizable-etcd36-16-clients.out"))
    assert list(reports) == [""]
    s = reports[""]
    assert s.requests == 200 and s.errors == 0 and s.requests_per_s == pytest.approx(3052.6, rel=1e-3)
    assert s.p50_ms is not None and s.p90_ms is not None and s.p99_ms is not None
    assert 0 < s.p50_ms <= s.p90_ms <= s.p99_ms <= (s.slowest_ms or 0)


def test_too_few_requests_for_a_p99_and_numbers_in_e_notation() -> None:
    """50 serializable ranges on raftkube: no 99th percentile, and a fastest of 9.3074e-05 s."""
    (s,) = parse(_sample("range-serializable-raftkube-50-requests.out")).values()
    assert s.requests == 50 and s.fastest_ms == pytest.approx(0.093074)
    assert s.p50_ms == pytest.approx(0.161297) and s.percentiles_ms["95"] == pytest.approx(0.255015)
    assert s.p99_ms is None and s.percentiles_ms["99.9"] is None


def test_watch_latency_has_a_put_and_a_watch_events_report() -> None:
    """raftkube, 16 watchers of 200 puts: the watch report counts every watcher's event, and
    the 10th percentile the tool leaves out is 0 (events that came before the put's answer)."""
    reports = parse(_sample("watch-latency-raftkube-16-clients.out"))
    assert list(reports) == ["put", "watch events"]
    puts, events = reports["put"], reports["watch events"]
    assert puts.requests == 200 and events.requests == 16 * 200
    assert puts.p99_ms == pytest.approx(10.879083)
    assert events.percentiles_ms["10"] == 0.0 and events.percentiles_ms["25"] == pytest.approx(0.182264)
    assert events.p99_ms == pytest.approx(2.566669) and events.percentiles_ms["99.9"] == pytest.approx(4.580905)


def test_a_run_answered_only_with_errors() -> None:
    """etcd 3.6 refusing 2 MB values: no summary, only the error distribution."""
    (s,) = parse(_sample("put-errors-only.out")).values()
    assert (s.requests, s.errors) == (0, 6)
    assert s.error_kinds == {"etcdserver: request is too large": 6}
    assert s.requests_per_s == 0.0 and s.p99_ms is None and s.total_s is None


def test_errors_beside_a_summary_are_counted() -> None:
    text = _sample("put-raftkube-1-client.out") + "\nError distribution:\n  [3]\tetcdserver: leader changed\n"
    (s,) = parse(text).values()
    assert (s.requests, s.errors, s.error_kinds) == (200, 3, {"etcdserver: leader changed": 3})


def test_output_without_a_report_is_an_error() -> None:
    with pytest.raises(ValueError, match="no report"):
        parse("dial error: context deadline exceeded\n")


# ---------------------------------------------------------------------- the command lines
def test_connections_are_one_per_16_clients_and_at_least_one() -> None:
    assert [conns_for(n) for n in (1, 16, 64, 256)] == [1, 1, 4, 16]


def test_the_command_lines() -> None:
    tls = ClientTLS("/p/ca.crt", "/p/admin.crt", "/p/admin.key")
    eps = ["https://127.0.0.1:1", "https://127.0.0.1:2"]
    put = etcd_tool.argv("/b/etcd-benchmark", "put", 64, 5000, eps, tls, Shape())
    assert put[:8] == [
        "/b/etcd-benchmark",
        "--endpoints=https://127.0.0.1:1,https://127.0.0.1:2",
        "--clients=64",
        "--conns=4",
        "--target-leader",
        "--precise",
        "--dial-timeout=10s",
        "--cacert=/p/ca.crt",
    ]
    assert put[10:] == ["put", "--key-size=8", "--val-size=256", "--key-space-size=10000", "--total=5000"]
    assert "--sequential-keys" not in put  # random keys
    ranges = [etcd_tool.argv("b", w, 1, 9, eps, None, Shape()) for w in ("range-linearizable", "range-serializable")]
    assert ranges[0][-4:] == ["range", etcd_tool.RANGE_KEY, "--consistency=l", "--total=9"]
    assert ranges[1][-4:] == ["range", etcd_tool.RANGE_KEY, "--consistency=s", "--total=9"]
    assert not any(a.startswith("--cacert") for a in ranges[0])
    txn = etcd_tool.argv("b", "txn-put", 16, 7, eps, None, Shape())
    assert txn[txn.index("txn-put") :] == [
        "txn-put",
        "--key-size=8",
        "--val-size=256",
        "--key-space-size=10000",
        "--total=7",
    ]
    watch = etcd_tool.argv("b", "watch-latency", 256, 700, eps, None, Shape())
    assert watch[watch.index("watch-latency") :] == [
        "watch-latency",
        "--streams=256",
        "--watchers-per-stream=1",
        "--put-total=700",
        "--put-rate=100",
        "--key-size=8",
        "--val-size=256",
    ]
    assert "--conns=16" in watch
    with pytest.raises(ValueError, match="unknown workload"):
        etcd_tool.argv("b", "lease", 1, 1, eps, None, Shape())


def test_the_cli_knows_the_tools_workloads() -> None:
    assert cli.ETCD_WORKLOADS == etcd_tool.WORKLOADS
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    args = p.parse_args(["--api", "etcd", "--total", "200", "--workloads", "put,watch-latency"])
    assert (args.api, args.total, args.workloads) == ("etcd", 200, ["put", "watch-latency"])
    assert p.parse_args([]).api == "native" and p.parse_args([]).json is None
    with pytest.raises(SystemExit):
        p.parse_args(["--api", "etcd", "--workloads", "lease"])
    with pytest.raises(SystemExit):
        p.parse_args(["--api", "etcd", "--total", "0"])


def test_the_plan_from_the_command_line() -> None:
    from bench.store.etcd_api import LEVELS, plan_from

    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    full = plan_from(p.parse_args(["--api", "etcd"]))
    assert (full.levels, full.seconds, full.total, full.tls, full.members) == (LEVELS, 6.0, None, True, 3)
    assert full.workloads == etcd_tool.WORKLOADS
    quick = plan_from(p.parse_args(["--api", "etcd", "--quick", "--tls", "off", "--levels", "16,1"]))
    assert (quick.seconds, quick.tls, quick.levels) == (1.0, False, (16, 1))
    tiny = plan_from(p.parse_args(["--api", "etcd", "--total", "200", "--workloads", "txn-put,put"]))
    assert tiny.total == 200 and tiny.workloads == ("put", "txn-put")  # always in the tool's order
    assert plan_from(p.parse_args(["--api", "etcd", "--tls", "both"])).tls


# ---------------------------------------------------------------------- sizing, against a fake tool
class FakeCluster:
    """What Runner reads of a cluster: no process to measure, no TLS."""

    label = "fake"
    tls = False
    client_tls = None
    endpoints = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]

    def pids(self) -> list[int]:
        return []


def _fake_tool(tmp_path: Path, sample: str, exit_code: int = 0) -> tuple[Path, Path]:
    """A stand-in for etcd-benchmark that records its arguments and prints a recorded report."""
    calls = tmp_path / "calls"
    tool = tmp_path / "etcd-benchmark"
    tool.write_text(
        f"#!/bin/sh\necho \"$*\" >> {calls}\necho 'grpc chatter' >&2\necho 'dial error: boom' >&2\n"
        f"cat {DATA / sample}\nexit {exit_code}\n"
    )
    tool.chmod(0o755)
    return tool, calls


def test_a_pilot_sizes_each_level_to_the_seconds_asked_for(tmp_path: Path) -> None:
    from bench.store.etcd_api import Plan, Runner
    from bench.store.progress import Progress

    tool, calls = _fake_tool(tmp_path, "put-raftkube-1-client.out")  # 396.38 requests/s, over 0.50 s
    runner = Runner(Plan(seconds=0.8), tmp_path / "run", tool, Progress())
    row = runner.level(FakeCluster(), "put", 64)  # type: ignore[arg-type]
    pilot, measured = calls.read_text().splitlines()
    assert pilot.endswith("--total=512") and "--clients=64 --conns=4" in pilot  # max(100, 8 x 64)
    assert measured.endswith(f"--total={round(396.38391873 * 0.8)}")
    assert "--endpoints=http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3" in measured
    assert row["total"] == 317 and [r["total"] for r in row["sizing"]] == [512] and row["requests"] == 200
    assert (row["clients"], row["conns"], row["errors"]) == (64, 4, 0)
    assert row["p99_ms"] == pytest.approx(8.170754) and row["wall_s"] > 0


def test_a_run_that_ends_too_soon_is_sized_again_from_its_own_rate(tmp_path: Path) -> None:
    """A pilot's rate includes its warm-up: a run shorter than 60 % of the seconds asked for
    sizes the next from its own rate, at most twice; the last run is the figure."""
    from bench.store.etcd_api import RESIZES, Plan, Runner
    from bench.store.progress import Progress

    tool, calls = _fake_tool(tmp_path, "put-raftkube-1-client.out")  # always 0.50 s
    row = Runner(Plan(seconds=5.0), tmp_path / "run", tool, Progress()).level(FakeCluster(), "put", 1)  # type: ignore[arg-type]
    totals = [line.rsplit("--total=", 1)[1] for line in calls.read_text().splitlines()]
    assert totals == ["100", "1982", "1982", "1982"] and RESIZES == 2
    assert [r["total"] for r in row["sizing"]] == [100, 1982, 1982] and row["total"] == 1982
    assert row["sizing"][1]["total_s"] == pytest.approx(0.504561337)


def test_the_sizes() -> None:
    from bench.store.etcd_api import pilot_total, sized_total

    assert [pilot_total(n) for n in (1, 16, 64, 256)] == [100, 128, 512, 2048]
    assert sized_total(2000.0, 6.0, 64) == 12000
    assert sized_total(10.0, 1.0, 1) == 100  # never too few for a p99
    assert sized_total(100.0, 1.0, 256) == 512


def test_watch_latency_runs_seconds_plus_one_of_puts_without_a_pilot(tmp_path: Path) -> None:
    from bench.store.etcd_api import Plan, Runner
    from bench.store.progress import Progress

    tool, calls = _fake_tool(tmp_path, "watch-latency-raftkube-16-clients.out")
    row = Runner(Plan(seconds=6.0), tmp_path / "run", tool, Progress()).level(FakeCluster(), "watch-latency", 16)  # type: ignore[arg-type]
    (only,) = calls.read_text().splitlines()
    assert "--put-total=700 --put-rate=100" in only and "--streams=16" in only
    assert row["requests"] == 3200 and row["watchers"] == 16 and row["puts"]["requests"] == 200
    assert row["sizing"] == [] and row["p99_ms"] == pytest.approx(2.566669)


def test_a_fixed_total_has_no_pilot_and_a_failed_run_says_why(tmp_path: Path) -> None:
    from bench.store.etcd_api import LevelFailed, Plan, Runner
    from bench.store.progress import Progress

    tool, calls = _fake_tool(tmp_path, "put-raftkube-1-client.out")
    runner = Runner(Plan(total=200), tmp_path / "run", tool, Progress())
    assert runner.level(FakeCluster(), "txn-put", 1)["total"] == 200  # type: ignore[arg-type]
    assert len(calls.read_text().splitlines()) == 1
    (tmp_path / "exits").mkdir()
    failing, _ = _fake_tool(tmp_path / "exits", "put-errors-only.out", exit_code=1)
    with pytest.raises(LevelFailed, match="exited 1: grpc chatter / dial error: boom"):
        Runner(Plan(total=200), tmp_path / "run2", failing, Progress()).level(FakeCluster(), "put", 1)  # type: ignore[arg-type]
    only_errors, _ = _fake_tool(tmp_path, "put-errors-only.out")
    with pytest.raises(LevelFailed, match="request is too large"):
        Runner(Plan(), tmp_path / "run3", only_errors, Progress()).level(FakeCluster(), "put", 1)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- not built
def _fake_peer(name: str, answer: str) -> None:
    """A script in the peers cache that `raftkube peers build` would have recorded as `name`."""
    path = peers.peer_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{answer}'\n")
    path.chmod(0o755)
    entry = {"peer": name, "version": peers.pinned_version(name), "source": "x", "built_at": "", "build_seconds": 0.0,
             "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "go": "go", "reports": answer}  # fmt: skip
    (path.parent / "manifest.json").write_text(json.dumps({"peers": {name: entry}}))


@pytest.mark.parametrize(
    ("built", "command"),
    [((), "--only etcd,etcd-benchmark"), (("etcd",), "--only etcd-benchmark"), (("etcd-benchmark",), "--only etcd`")],
)
def test_a_missing_peer_ends_the_run_with_exit_1_before_anything_starts(
    built: tuple[str, ...],
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    answers = {"etcd": f"etcd Version: {peers.ETCD_VERSION[1:]}", "etcd-benchmark": "benchmark is a low-level"}
    for name in built:
        _fake_peer(name, answers[name])
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = tmp_path / "out" / "x.json"
    assert cli.main(["--api", "etcd", "--quick", "--total", "10", "--levels", "1", "--json", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"build with `raftkube peers build {command}" in err
    assert not out.parent.exists() and not any(scratch.iterdir())  # no results, no cluster dir


# ---------------------------------------------------------------------- the table and the targets
def _row(clients: int, rate: float, p99: float, errors: int = 0) -> dict[str, Any]:
    return {"clients": clients, "conns": conns_for(clients), "requests_per_s": rate, "p50_ms": p99 / 4,
            "p90_ms": p99 / 2, "p99_ms": p99, "errors": errors, "requests": 1000}  # fmt: skip


def _doc(raftkube: dict[str, list[dict[str, Any]]], etcd: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    results = {"raftkube": raftkube, "etcd36": etcd}
    machine = {"cpu_model": "x", "cores": 2, "git_commit": "abcdef123456789", "etcd36": "3.6.17",
               "load_average_at_start": [0.1, 0.2, 0.3], "load_average_at_end": [0.4, 0.5, 0.6]}  # fmt: skip
    plan = {"total": None, "seconds": 6.0, "shape": {"key_size": 8, "value_size": 256, "keyspace": 10000,
            "watch_put_rate": 100}}  # fmt: skip
    config = {"tool": "etcd-benchmark v3.6.14 (etcd's tools/benchmark)", "members": 3, "tls": True, "quick": False,
              "plan": plan, "failed": []}  # fmt: skip
    found = targets.evaluate_etcd_api(results)
    return {"machine": machine, "config": config, "results": results, "targets": [t.to_json() for t in found]}


def test_the_table_puts_the_systems_side_by_side_with_the_ratio() -> None:
    doc = _doc(
        {"put": [_row(64, 3000.0, 20.0), _row(256, 4000.0, 80.0)], "watch-latency": [_row(16, 1600.0, 2.0)]},
        {"put": [_row(64, 2000.0, 40.0), _row(256, 5000.0, 40.0)], "watch-latency": [_row(16, 1600.0, 1.0)]},
    )
    text = etcd_api_report.render(doc)
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("workload"))
    assert head.index("raftkube req/s") < head.index("etcd 3.6 req/s") < head.index("ratio")
    put64 = next(line for line in lines if line.split()[:2] == ["put", "64"])
    assert put64.split()[:6] == ["put", "64", "4", "3,000", "2,000", "1.50x"]
    assert (
        "5.00 / 10.0 / 20.0" in put64
        and "10.0 / 20.0 / 40.0" in put64
        and put64.split()[-4:] == ["0.50x", "0", "/", "0"]
    )
    assert "load average (1, 5, 15 min) 0.10 0.20 0.30 at the start, 0.40 0.50 0.60 at the end" in text
    assert "--conns max(1, N/16)" in text and "mutual TLS" in text and "busy machine" not in text
    met = {t["name"]: t["met"] for t in doc["targets"]}
    assert met == {
        "put/s at 64 clients vs etcd 3.6": True,
        "put p99 at 64 clients vs etcd 3.6": True,
        "put/s at 256 clients vs etcd 3.6": False,
        "put p99 at 256 clients vs etcd 3.6": False,
    }
    md = etcd_api_report.markdown(doc)
    assert (
        "| put | 64 | 4 | 3,000 | 2,000 | 1.50x |" in md
        and "| put/s at 256 clients vs etcd 3.6 | >= 1.0x | 0.80x | NO |" in md
    )


def test_a_raftkube_level_with_errors_or_failed_meets_no_target() -> None:
    doc = _doc(
        {"put": [_row(64, 3000.0, 20.0, errors=2), {"clients": 256, "conns": 16, "failed": "exited 1"}]},
        {"put": [_row(64, 2000.0, 40.0), _row(256, 2000.0, 40.0)]},
    )
    met = {t["name"]: (t["value"], t["met"]) for t in doc["targets"]}
    assert met["put/s at 64 clients vs etcd 3.6"] == (1.5, False)
    assert met["put/s at 256 clients vs etcd 3.6"] == (None, None)
    text = etcd_api_report.render(doc)
    assert "FAILED" in next(line for line in text.splitlines() if line.split()[:2] == ["put", "256"])


def test_a_busy_machine_is_called_out() -> None:
    """By the load at the start: the end's is this run's own as much as anyone's."""
    doc = _doc({"put": [_row(1, 1.0, 1.0)]}, {"put": [_row(1, 1.0, 1.0)]})
    doc["machine"]["load_average_at_end"] = [3.5, 2.0, 1.0]
    assert "busy machine" not in etcd_api_report.render(doc)
    doc["machine"]["load_average_at_start"] = [1.5, 2.0, 1.0]
    assert "a busy machine at the start: these figures mislead" in etcd_api_report.render(doc)


# ---------------------------------------------------------------------- end to end
@pytest.mark.peers
def test_quick_etcd_api_end_to_end_with_tiny_totals(tmp_path: Path) -> None:
    """Both 3-member clusters with mutual TLS, every workload at 1, 16, 64 and 256 clients, 100
    requests (watch-latency: puts) a level: every level answered without error, both files written."""
    out = tmp_path / "store-etcd-api.json"
    argv = [sys.executable, "-m", "components.cli", "bench", "store", "--api", "etcd", "--quick", "--total", "100"]
    t0 = time.monotonic()
    proc = subprocess.run(
        [*argv, "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert elapsed < 150, f"the smoke run took {elapsed:.0f}s"
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "store-etcd-api" and doc["config"]["failed"] == []
    assert doc["config"]["tls"] is True and doc["config"]["members"] == 3
    assert (
        doc["machine"]["etcd36"].startswith("3.6.") and doc["machine"]["etcd_benchmark"] == peers.ETCD_BENCHMARK_VERSION
    )
    assert len(doc["machine"]["load_average_at_start"]) == len(doc["machine"]["load_average_at_end"]) == 3
    for system in ("raftkube", "etcd36"):
        assert list(doc["results"][system]) == list(etcd_tool.WORKLOADS)
        for workload, rows in doc["results"][system].items():
            assert [r["clients"] for r in rows] == [1, 16, 64, 256], (system, workload)
            for r in rows:
                assert "failed" not in r and r["errors"] == 0 and r["total"] == 100, (system, workload, r)
                expect = 100 * r["clients"] if workload == "watch-latency" else 100
                assert r["requests"] == expect and r["requests_per_s"] > 0, (system, workload, r)
                assert r["p50_ms"] is not None and r["p99_ms"] is not None and r["p50_ms"] <= r["p99_ms"]
    assert len(doc["targets"]) == 8 and all(t["value"] is not None for t in doc["targets"])
    md = out.with_suffix(".md").read_text()
    assert "| put | 256 | 16 |" in md and "## Targets" in md
    assert "raftkube req/s" in proc.stdout and "TARGETS" in proc.stdout and "watch-latency: " in proc.stderr
