"""A line per finished spec, read from ginkgo's verbose output (reporters/default_reporter.go).

A spec that ran ends with a header line of its own: `• [12.345 seconds]` (passed),
`• [FAILED] [12.345 seconds]` (or PANICKED, TIMEDOUT, INTERRUPTED, ABORTED),
`S [SKIPPED] [0.123 seconds]` (skipped while running, with a reason).  The specs that focus
and skip leave out are a bare `S` each, run together on lines of their own (thousands of
them); they are counted, not listed.  The spec's name is the text line right after the
header (ginkgo's parallel output, and every failure) or else the last name line seen before
it (a single process streams the name first, then the spec's output, then the header).
Names are the lines that begin with a `[sig-...]` tag, as every e2e spec's does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ANSI = re.compile(r"\x1b\[[0-9;]*m")
HEADER = re.compile(
    r"^(?P<mark>[•S+P↺R])(?: \[(?P<state>[A-Z!][A-Z0-9! -]*?)\])?(?: \[(?P<secs>\d+(?:\.\d+)?) seconds\])?$"
)
SUITE_NODE = re.compile(r"^\[(?P<node>\w*(?:Suite|Cleanup)\w*)\] (?:\[(?P<state>[A-Z!]+)\]|PASSED)")
DENOTERS = re.compile(r"^[S•P]+$")
NAME = re.compile(r"^\[sig-[\w-]+\] ")
LABELS = re.compile(r" \[[^\[\]]+(?:, [^\[\]]+)+\]$")
"""The labels ginkgo appends to a name line (`[sig-node, Conformance]`): the name has them as tags."""
FAILED_STATES = ("FAILED", "PANICKED", "TIMEDOUT", "INTERRUPTED", "ABORTED")


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    """Skipped while running (with a reason)."""
    not_selected: int = 0
    """Left out by focus and skip (the bare `S`s)."""

    def line(self) -> str:
        return f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"


@dataclass
class Progress:
    """Fed ginkgo's output line by line; returns the progress lines to show."""

    counts: Counts = field(default_factory=Counts)
    _last_name: str = ""
    _pending: tuple[str, float | None] | None = None
    """A finished spec's outcome and seconds, waiting one line for its name."""

    def feed(self, raw: str) -> list[str]:
        line = ANSI.sub("", raw).rstrip()
        out: list[str] = []
        if self._pending is not None:
            outcome, secs = self._pending
            self._pending = None
            out.append(self._finished(outcome, secs, line if NAME.match(line) else self._last_name))
        if NAME.match(line):
            self._last_name = line
            return out
        if DENOTERS.match(line):
            self.counts.not_selected += line.count("S") + line.count("P")
            self.counts.passed += line.count("•")  # succinct output: a bare • is a passed spec
            return out
        header = HEADER.match(line)
        if header:
            state = header["state"] or ""
            if (header["mark"] == "S" and not state) or header["mark"] == "P":
                self.counts.not_selected += 1  # left out (or pending): no line of its own
            else:
                outcome = (
                    "FAILED"
                    if state.split(" ")[0] in FAILED_STATES
                    else "SKIPPED"
                    if header["mark"] == "S"
                    else "PASSED"
                )
                self._pending = (state if outcome == "FAILED" else outcome, _seconds(header["secs"]))
            return out
        suite = SUITE_NODE.match(line)
        if suite and suite["state"] in FAILED_STATES:
            out.append(
                f"[{self.counts.line()}] suite setup {suite['node']} {suite['state']}: every spec may be skipped"
            )
        return out

    def finish(self) -> list[str]:
        """The last spec's line, when the output ended right after its header."""
        if self._pending is None:
            return []
        outcome, secs = self._pending
        self._pending = None
        return [self._finished(outcome, secs, self._last_name)]

    def _finished(self, outcome: str, secs: float | None, name: str) -> str:
        if outcome == "PASSED":
            self.counts.passed += 1
        elif outcome == "SKIPPED":
            self.counts.skipped += 1
        else:
            self.counts.failed += 1
        took = f" ({secs:.1f} s)" if secs is not None else ""
        return f"[{self.counts.line()}] {outcome:<7} {LABELS.sub('', name) or '(unnamed spec)'}{took}"


def _seconds(text: str | None) -> float | None:
    return float(text) if text is not None else None
