"""The `raftkube` command as a user runs it: a real process, real exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def raftkube(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "components.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_bench_raft_core_prints_table_and_writes_json(tmp_path: Path) -> None:
    """`raftkube bench raft-core` prints a row per batch size and writes the same figures as JSON."""
    out = tmp_path / "raft_core.json"
    proc = raftkube("bench", "raft-core", "--seconds", "0.2", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip() and line.split()[0].isdigit()]
    assert [r[0] for r in rows] == ["1", "64", "1024"]
    report = json.loads(out.read_text())
    assert [f["batch"] for f in report["figures"]] == [1, 64, 1024]
    assert all(f["entries"] >= f["batch"] * 3 and f["cpu_us_per_entry"] > 0 for f in report["figures"])
    assert report["machine"]["python"]


def test_unknown_command_exits_2() -> None:
    """An unknown command is bad usage: exit 2 and a message naming it."""
    proc = raftkube("bogus")
    assert proc.returncode == 2
    assert "invalid choice: 'bogus'" in proc.stderr


def test_bad_flag_value_exits_2() -> None:
    """A negative duration is refused with exit 2 and the reason."""
    proc = raftkube("bench", "raft-core", "--seconds", "-1")
    assert proc.returncode == 2
    assert "must be positive" in proc.stderr


def test_bad_config_exits_2(tmp_path: Path) -> None:
    """A broken cluster.toml is refused with exit 2 and a message naming the key."""
    cfg = tmp_path / "cluster.toml"
    cfg.write_text("[store.raft]\nheartbeat_ticks = 'x'\n")
    proc = raftkube("bench", "raft-core", "--seconds", "0.1", "--config", str(cfg), "--json", str(tmp_path / "o.json"))
    assert proc.returncode == 2
    assert "store.raft.heartbeat_ticks must be an integer" in proc.stderr


def test_version() -> None:
    """--version answers without doing anything else."""
    proc = raftkube("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("raftkube ")
