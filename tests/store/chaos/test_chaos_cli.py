"""`raftkube chaos` as a user runs it: as root its members are on hosts of their own with TLS
on by default, and every fault runs there, delay too (this kernel has no netem: a delay proxy
in the sender's namespace holds the bytes, store/chaos/delay_proxy.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import raftkube


def test_as_root_the_default_is_hosts_of_their_own_and_delay_runs_there(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("hosts of their own need root (CI runs as root)")
    proc = raftkube("chaos", "--faults", "delay", "--seed", "1", "--traffic", "1", "--report", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (scenario,) = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert scenario["scenario"] == "delay+netns@1" and scenario["passed"], scenario
    assert "delay 75±50 ms on leader" in scenario["fault_account"], scenario
    local = raftkube("chaos", "--hosts", "local", "--faults", "nope", "--report", str(tmp_path / "l"))
    assert local.returncode == 2 and "unknown fault 'nope'" in local.stderr
