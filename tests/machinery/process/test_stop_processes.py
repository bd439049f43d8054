"""Stopping several parts at once (machinery.process.launch.stop_processes): each is sent SIGTERM
before any is waited for, one that ignores it is killed at the timeout, and every one is
marked stopped on purpose so that a supervisor leaves it down."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from machinery.process import launch

SLOW_TO_STOP = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (time.sleep({delay}), sys.exit(0)))\n"
    "time.sleep(60)\n"
)
"""A part that takes `delay` seconds to shut down after SIGTERM."""

DEAF = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"


def _start(root: Path, name: str, code: str) -> Path:
    pid_file = root / name / "pid"
    launch.spawn([sys.executable, "-c", code], root / name / "log", pid_file)
    return pid_file


def _wait_started(pid_files: list[Path]) -> None:
    """Until each has set its SIGTERM handler (its interpreter is up): a bounded wait."""
    deadline = time.monotonic() + 30
    for pid_file in pid_files:
        pid = launch.read_pid(pid_file)
        assert pid is not None
        while time.monotonic() < deadline:
            status = Path(f"/proc/{pid}/status").read_text()
            caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
            ignored = int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
            if (caught | ignored) & (1 << (15 - 1)):  # SIGTERM's bit
                break
            time.sleep(0.02)


def test_parts_are_stopped_together_not_one_after_the_other(tmp_path: Path) -> None:
    pid_files = [_start(tmp_path, f"part-{i}", SLOW_TO_STOP.format(delay=1.0)) for i in range(3)]
    _wait_started(pid_files)
    absent = tmp_path / "never-started" / "pid"
    began = time.monotonic()
    assert launch.stop_processes([*pid_files, absent], timeout=20) == [True, True, True, False]
    took = time.monotonic() - began
    assert took < 2.5, f"{took:.2f}s: three 1 s shutdowns were waited for one after the other"
    for pid_file in pid_files:
        assert launch.read_pid(pid_file) is None and not pid_file.exists()
        assert launch.stopped_on_purpose(pid_file)


def test_a_part_deaf_to_sigterm_is_killed_at_the_timeout_and_the_others_are_not_held_up(tmp_path: Path) -> None:
    deaf = _start(tmp_path, "deaf", DEAF)
    quick = _start(tmp_path, "quick", SLOW_TO_STOP.format(delay=0))
    _wait_started([deaf, quick])
    pids = [launch.read_pid(deaf), launch.read_pid(quick)]
    assert launch.stop_processes([deaf, quick], timeout=1.0) == [True, True]
    assert all(launch.read_pid(p) is None for p in (deaf, quick))
    assert launch.exit_code(pids[0]) == -9 and launch.exit_code(pids[1]) == 0
