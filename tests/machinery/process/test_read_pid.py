"""read_pid: a pid file names a live process, or nothing; a process that ends while it is
being looked at is gone, not an error (a suite's fixture teardown met ProcessLookupError when
the apiserver exited between the signal and the read of /proc/<pid>/stat)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from machinery.process.launch import read_pid


def test_a_live_process_and_an_ended_one(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    assert read_pid(pid_file) is None  # no file
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pid_file.write_text(f"{child.pid}\n")
        assert read_pid(pid_file) == child.pid
    finally:
        child.kill()
        child.wait()
    assert read_pid(pid_file) is None
    pid_file.write_text("not a pid")
    assert read_pid(pid_file) is None


@pytest.mark.parametrize("error", [ProcessLookupError, FileNotFoundError])
def test_a_process_that_ends_between_the_signal_and_the_read_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[OSError]
) -> None:
    pid_file = tmp_path / "pid"
    pid_file.write_text(str(os.getpid()))  # alive to os.kill(pid, 0)
    real_read = Path.read_text

    def racing(self: Path, *args: object, **kwargs: object) -> str:
        if str(self).startswith("/proc/"):
            raise error(3, "No such process")
        return real_read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", racing)
    assert read_pid(pid_file) is None
