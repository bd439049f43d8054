"""Running the `raftkube` command as a user would: a real process, its exit code and output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def raftkube(
    *args: str,
    stdin: str | None = None,
    timeout: float = 60,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`cwd` other than the checkout: the checkout's code all the same (PYTHONPATH); `env`
    replaces the environment."""
    if env is not None or cwd != ROOT:
        env = {**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "components.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        input=stdin,
    )


CTRL_C_ABLE = (
    "import runpy, signal, sys; "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'raftkube'; "
    "runpy.run_module('components.cli', run_name='__main__')"
)
"""Starts the command with Ctrl-C (SIGINT) working whatever this process was started with: a
job started in the background of a script (as CI may run the suite) has SIGINT ignored, and
its children inherit that, so a test's SIGINT would do nothing."""


def raftkube_interactive(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The command as a long-running process, as a user at a terminal runs it."""
    return subprocess.Popen(
        [sys.executable, "-c", CTRL_C_ABLE, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
