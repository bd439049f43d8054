"""The README's test command is the CI script, and the script can run from a fresh clone."""

from __future__ import annotations

import subprocess

from tests.support.paths import ROOT


def test_readme_test_command_is_the_ci_script() -> None:
    """The README's second quick-start command is `.ci/run` itself (it does all the set-up)."""
    quick_start = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in quick_start.splitlines() if line.startswith("    ")]
    assert len(commands) == 2, commands
    assert commands[1] == ".ci/run"


def test_ci_script_is_executable_in_git() -> None:
    """A fresh clone gets .ci/run with its executable bit (git mode 100755)."""
    out = subprocess.run(["git", "ls-files", "-s", ".ci/run"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "100755", out.stdout
    proc = subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
