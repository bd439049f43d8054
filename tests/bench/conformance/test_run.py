"""The runner's orchestration against a fake e2e.test and a fake kubectl (data/): the pass
runs with its flags, progress is shown, the reports are written, the namespaces the run
made (and only those) are deleted; at --timeout the pass's whole process group is killed,
children included, even when they ignore SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.conformance import run
from bench.conformance.options import IMAGE_PEERS
from components.cli.main import main
from machinery.process import peers
from tests.support.paths import ROOT

DATA = Path(__file__).parent / "data"


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    e2e = peers.peer_path("e2e.test")
    e2e.parent.mkdir(parents=True)
    e2e.write_text(f"#!{sys.executable}\n" + (DATA / "fake_e2e.py").read_text())
    e2e.chmod(0o755)
    for image_peer in IMAGE_PEERS:  # the run only checks they are there
        peers.peer_path(image_peer).parent.mkdir(parents=True, exist_ok=True)
        peers.peer_path(image_peer).write_text("#!/bin/sh\n")
    (tmp_path / "namespaces").write_text("default kube-system my-app-2")
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("FAKE_E2E_JUNIT", str(DATA / "junit_01.xml"))
    for name, value in {
        "FAKE_E2E_LOG": "e2e.args",
        "FAKE_E2E_PIDS": "e2e.pids",
        "FAKE_KUBECTL_STATE": "namespaces",
        "FAKE_KUBECTL_LOG": "kubectl.log",
    }.items():
        monkeypatch.setenv(name, str(tmp_path / value))
    return tmp_path


def conformance(tmp: Path, *argv: str) -> int:
    return main(
        [
            "conformance",
            "--kubeconfig",
            str(tmp / "kubeconfig"),
            "--kubectl",
            str(DATA / "fake_kubectl.sh"),
            "--report",
            str(tmp / "out"),
            *argv,
        ]
    )


def test_a_run_shows_progress_writes_reports_and_deletes_only_its_namespaces(
    fakes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert conformance(fakes, "--focus", "Discovery|ServiceAccounts") == 1  # a spec failed
    out = capsys.readouterr().out
    assert "[1 passed, 0 failed, 0 skipped] PASSED  [sig-api-machinery] Discovery should validate" in out
    assert "[1 passed, 1 failed, 0 skipped] FAILED  [sig-auth] ServiceAccounts" in out
    args = (fakes / "e2e.args").read_text()
    assert "--ginkgo.focus=Discovery|ServiceAccounts" in args and f"--kubeconfig={fakes / 'kubeconfig'}" in args
    doc = json.loads((fakes / "out" / "conformance.json").read_text())
    assert doc["total"]["failed"] == 3 and doc["run"]["passes"][0]["exit"] == 1 and doc["run"]["cut"] == ""
    assert (fakes / "out" / "conformance.md").exists()
    assert (fakes / "out" / "conformance-junit" / "all" / "e2e.log").read_text().startswith("Running Suite")
    # e2e-watch-4711 appeared during the run; my-app-2 was there before: never touched
    assert (fakes / "kubectl.log").read_text().split()[-1] == "e2e-watch-4711"
    assert "my-app-2" not in (fakes / "kubectl.log").read_text()


def test_the_timeout_kills_the_pass_and_its_children(
    fakes: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_E2E_MODE", "hang")
    monkeypatch.setattr(run, "MIN_PASS_S", 0.0)
    monkeypatch.setattr(run, "INTERRUPT_GRACE_S", 0.5)
    started = time.monotonic()
    assert conformance(fakes, "--timeout", "3s") == 1
    assert time.monotonic() - started < 30
    out = capsys.readouterr().out
    assert "--timeout reached: interrupting pass all" in out and "PASSED  [sig-api-machinery] Discovery" in out
    pids = [int(p) for p in (fakes / "e2e.pids").read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids), "e2e.test or its child outlived the run"
    assert "e2e-watch-4711" in (fakes / "kubectl.log").read_text()  # cleaned up all the same


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize(
    ("sig", "e2e"),
    [(signal.SIGTERM, "hang"), (signal.SIGINT, "interruptible")],
    ids=["SIGTERM-e2e-deaf-to-SIGINT", "SIGINT-inherited-ignored"],
)
def test_a_signal_stops_the_run_its_pass_and_cleans_up(fakes: Path, sig: signal.Signals, e2e: str) -> None:
    """`kill` of a run (or Ctrl-C of one a shell started in the background, which inherits SIGINT
    ignored) stops it as Ctrl-C does: the pass's processes end, its namespaces are deleted, no
    later pass starts.  A TERM used to end the wrapper alone and leave its cluster running."""
    env = {**os.environ, "FAKE_E2E_MODE": e2e}  # an e2e.test deaf to SIGINT is killed after a grace of 10 s
    argv = [sys.executable, "-m", "components.cli", "conformance", "--kubeconfig", str(fakes / "kubeconfig")]
    argv += ["--kubectl", str(DATA / "fake_kubectl.sh"), "--report", str(fakes / "out"), "--parallel", "1"]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509 (no threads yet)
    )
    try:
        deadline = time.monotonic() + 30
        while not (fakes / "e2e.pids").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [int(p) for p in (fakes / "e2e.pids").read_text().split()]
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out.decode(errors="replace")[-2000:]
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids), "e2e.test or its child outlived the run"
    assert "e2e-watch-4711" in (fakes / "kubectl.log").read_text()  # its namespace deleted
    assert (fakes / "e2e.args").read_text().count("\n") == 1  # no second pass started
