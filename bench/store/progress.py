"""One updating line per phase on stderr, so that a long run shows where it is."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.phase = ""
        self.t0 = time.monotonic()
        self.t_phase = self.t0
        self._last = ""

    def start(self, phase: str) -> None:
        self.end()
        self.phase = phase
        self.t_phase = time.monotonic()
        self.update("starting")

    def update(self, message: str, transient: bool = False) -> None:
        """Replace the current line on a terminal; in a log, print steps but not `transient` ticks."""
        line = f"[{time.monotonic() - self.t0:6.1f}s] {self.phase}: {message}"
        if self.tty:
            self.stream.write("\r\033[K" + line)
        elif not transient:
            self.stream.write(line + "\n")
        self._last = line
        self.stream.flush()

    def end(self, message: str = "") -> None:
        if not self.phase:
            return
        if message:
            self.update(f"{message} ({time.monotonic() - self.t_phase:.1f}s)")
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()
        self.phase = ""
        self._last = ""
