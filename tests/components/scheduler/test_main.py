"""Bad flags and kubeconfigs end the process with a message and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def run(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "components.scheduler", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)


def test_missing_kubeconfig_file(tmp_path: Path) -> None:
    r = run("--kubeconfig", str(tmp_path / "absent"))
    assert r.returncode == 2 and "no such file" in r.stderr


def test_bad_flags() -> None:
    assert run("--bogus").returncode == 2
    r = run("--kubeconfig", "x", "--lease-duration", "1", "--renew-deadline", "2")
    assert r.returncode == 2
