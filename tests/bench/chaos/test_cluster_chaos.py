"""`raftkube chaos cluster` as a user runs it: the CI subset of the cluster chaos runs.  A
short run under mixed faults passes every check (SIGKILLs of store members, apiservers, the
balancer, the controller-manager's and scheduler's leaders and the kubelets; SIGSTOPs of the
same; as root, with every part on a host of its own, their cables pulled; at times two at
once), and each canary run (apiservers that lose one watch event, or acknowledge
writes they never make; schedulers that schedule without their Lease) fails on the check that
is there for it and on nothing else.  Each
run brings up an HA cluster of its own (3 members, 2 apiservers behind the balancer, 2
controller-managers, 2 schedulers, hollow nodes) and leaves no process behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from machinery.process.hosts import can_make_hosts
from tests.support.cli import raftkube


def chaos(tmp_path: Path, *args: str) -> tuple[int, str]:
    report = tmp_path / "report"
    proc = raftkube("chaos", "cluster", "--report", str(report), *args, timeout=420)
    text = (report / "report.md").read_text() if (report / "report.md").exists() else proc.stdout + proc.stderr
    return proc.returncode, text


def test_a_run_under_mixed_faults_passes_every_check(tmp_path: Path) -> None:
    """As root (CI), every part but the balancer on a host of its own, and cables pulled too."""
    hosts = (
        ("--hosts", "netns", "--faults", "kill,pause,unplug")
        if can_make_hosts() is None
        else ("--faults", "kill,pause")
    )
    code, report = chaos(tmp_path, "--seed", "11", "--duration", "20", *hosts, "--mixed")
    assert code == 0, report
    assert "| FAIL |" not in report and "## Faults" in report
    assert (tmp_path / "report" / "timeline.png").stat().st_size > 0
    assert not (tmp_path / "report" / "cluster").exists()  # a passing run removes its cluster


@pytest.mark.parametrize(
    ("canary", "caught_by", "says"),
    [
        ("drop-watch-event", "every apiserver's watch stream whole and in order", "events missing"),
        ("ack-before-commit", "acknowledged writes kept, refused ones never applied", "the store has no such write"),
        (
            "scheduler-ignores-lease",
            "every binding made by the scheduler holding the Lease",
            "without holding the Lease",
        ),
    ],
)
def test_each_canary_is_caught_by_its_check_alone(tmp_path: Path, canary: str, caught_by: str, says: str) -> None:
    code, report = chaos(tmp_path, "--seed", "13", "--duration", "8", "--faults", "kill-apiserver", "--canary", canary)
    assert code == 1, report
    failed = [line for line in report.splitlines() if line.endswith("| FAIL |")]
    assert failed and all(caught_by in line for line in failed), report
    assert says in report


def test_bad_flags_are_refused_with_exit_2(tmp_path: Path) -> None:
    proc = raftkube("chaos", "cluster", "--faults", "kill-nothing", "--report", str(tmp_path / "r"))
    assert proc.returncode == 2 and "unknown fault 'kill-nothing'" in proc.stderr
    proc = raftkube("chaos", "cluster", "--duration", "1", "--report", str(tmp_path / "r"))
    assert proc.returncode == 2 and "--duration must be from 5" in proc.stderr
    assert raftkube("chaos", "--list").returncode == 0  # the store's chaos is where it was
    proc = raftkube("chaos", "cluster", "--faults", "net", "--hosts", "local", "--report", str(tmp_path / "r"))
    assert proc.returncode == 2 and "network faults need --hosts netns" in proc.stderr
