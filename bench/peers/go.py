"""The machine's `go`, found and run: the one place that turns its failures into our messages.

A missing `go`, or a module proxy turned off (`GOPROXY=off`), is found before anything is
built and said as usage (exit 2: nothing ran).  A `go` command that fails (no network to the
proxy, a compile error) is a build failure (exit 1) whose message carries the tail of go's
own output, since that is where the reason is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from machinery.process.command import UsageError

TAIL_LINES = 25
PROXY_TROUBLE = ("dial tcp", "no such host", "i/o timeout", "connection refused", "TLS handshake")


class BuildError(Exception):
    """A `go` command failed; the message names it and carries the tail of its output."""


@dataclass(frozen=True)
class Go:
    exe: str
    version: str
    """`go env GOVERSION`, recorded with each binary."""
    proxy: str

    def run(self, args: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True) -> str:
        """Run `go args` in `cwd` and return its output (stdout and stderr together); unless
        `check` is false, a failure is a BuildError."""
        cwd.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [self.exe, *args],
            check=False,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        if check and proc.returncode != 0:
            raise BuildError(failure(["go", *args], proc.returncode, proc.stdout, self.proxy))
        return proc.stdout


def failure(argv: list[str], code: int, output: str, proxy: str) -> str:
    """The message for a failed go command: what ran, its status, the tail of its output, and
    a hint when that tail looks like the module proxy could not be reached."""
    lines = output.rstrip().splitlines()
    tail = "\n".join(f"    {line}" for line in lines[-TAIL_LINES:]) or "    (no output)"
    command = " ".join(argv)
    if len(command) > 200:
        command = command[:200] + " ..."
    message = f"`{command}` failed (exit {code}); the last lines of its output:\n{tail}"
    if any(mark in output for mark in PROXY_TROUBLE):
        message += f"\nThe Go module proxy (GOPROXY={proxy}) looks unreachable: the peers are built from it."
    return message


def find_go() -> Go:
    """The `go` on PATH with its version and proxy, or a UsageError saying what is missing."""
    exe = shutil.which("go")
    if exe is None:
        raise UsageError(
            "`go` is not on PATH: the peers are built from source with Go 1.24 or newer "
            "through the Go module proxy (install it from https://go.dev/dl/ and run again)"
        )
    try:
        proc = subprocess.run(
            [exe, "env", "-json", "GOVERSION", "GOPROXY"], check=False, capture_output=True, text=True, timeout=60
        )
        settings = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        settings = None
    if not isinstance(settings, dict):
        raise UsageError(f"`{exe} env` did not answer: is {exe} a working Go toolchain?")
    proxy = str(settings.get("GOPROXY", ""))
    if proxy in ("", "off"):
        raise UsageError(
            f"the Go module proxy is off (GOPROXY={proxy or '(empty)'}): the peers are fetched through it; "
            "set it with `go env -w GOPROXY=https://proxy.golang.org,direct`"
        )
    return Go(exe=exe, version=str(settings.get("GOVERSION", "unknown")), proxy=proxy)


def json_objects(output: str) -> list[dict[str, object]]:
    """The JSON objects `go ... -json` printed one after another (anything else is skipped)."""
    decoder, found, at = json.JSONDecoder(), [], output.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(output, at)
        except ValueError:
            at = output.find("{", at + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        at = output.find("{", end)
    return found
