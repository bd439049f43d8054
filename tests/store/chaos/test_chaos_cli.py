"""`raftkube chaos` as a user runs it: as root its members are on hosts of their own with TLS
on by default, and a fault this kernel cannot make is left out, said, not run as a no-op."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store.chaos.kernel_net import kernel_can_delay
from tests.support.cli import raftkube


def test_as_root_the_default_is_hosts_of_their_own_and_delay_without_netem_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("hosts of their own need root (CI runs as root)")
    if kernel_can_delay():
        pytest.skip("this kernel has tc netem: delay would run")
    proc = raftkube("chaos", "--faults", "delay", "--seed", "1", "--report", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "leaving out `delay`: this kernel has no tc netem" in proc.stderr
    assert "names no fault this kernel can make under --hosts netns" in proc.stderr
    local = raftkube("chaos", "--hosts", "local", "--faults", "nope", "--report", str(tmp_path / "l"))
    assert local.returncode == 2 and "unknown fault 'nope'" in local.stderr
