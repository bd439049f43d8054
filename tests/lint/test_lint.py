"""Lint, format and type checks run as part of the test suite: a failing lint fails CI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT


def _tool(name: str) -> list[str]:
    """Prefer the tool installed next to this interpreter (the project's venv)."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return [str(local)]
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: install the project with its test extra (pip install -e '.[test]')")
    return [found]


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"


def test_ruff_lint() -> None:
    """ruff finds no lint errors anywhere in the project."""
    _run([*_tool("ruff"), "check", "."])


def test_ruff_format() -> None:
    """Every file is formatted as `ruff format` would."""
    _run([*_tool("ruff"), "format", "--check", "."])


def test_mypy_strict() -> None:
    """store/, machinery/, apiserver/, components/ and bench/ type-check under mypy --strict (pyproject.toml)."""
    _run([*_tool("mypy")])
