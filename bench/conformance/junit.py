"""Ginkgo v2's JUnit XML (reporters/junit_report.go), as e2e.test writes it: `junit_01.xml`.

`<testsuites><testsuite>` holds one `<testcase>` per spec, named `[It] <full text>` (kube
keeps the node type and drops the labels, which are in the text as `[tags]`), with `status`
(passed, failed, skipped, pending, panicked, interrupted, aborted, timedout) and `time` in
seconds; `<failure>` or `<error>` carry what failed (kube omits the message attribute, so the
text is the failure's body), `<skipped message="skipped - REASON"/>` a spec skipped while
running.  The specs that focus and skip left out are there too, `<skipped message="skipped"/>`
with no reason: thousands of them, counted apart (a selected spec that never ran, after a
suite timeout, looks the same: the report's focus and skip tell them apart, `Selection`).
The suite's own nodes (SynchronizedBeforeSuite, ReportAfterSuite, ...) are kept apart: they
are no test, but when one fails nothing else ran.

A run's passes each write a report in which the other passes' specs are "left out": reading
several files keeps, for each spec, the result where it ran.  A few specs share their full
text (6,740 specs, 6,734 names in v1.33): they are kept apart, not merged into one.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from machinery.process.command import UsageError

PASSED, FAILED, SKIPPED, NOT_SELECTED = "passed", "failed", "skipped", "not-selected"
NOT_RUN = "not run:"
"""How the message of a selected spec that never ran begins."""
FAILED_STATUSES = frozenset({"failed", "panicked", "interrupted", "aborted", "timedout"})
SUITE_NODES = frozenset(
    {
        "BeforeSuite",
        "AfterSuite",
        "SynchronizedBeforeSuite",
        "SynchronizedAfterSuite",
        "ReportBeforeSuite",
        "ReportAfterSuite",
        "DeferCleanup (Suite)",
    }
)
NODE = re.compile(r"^\[(?P<node>It|[A-Za-z]*Suite|DeferCleanup \(Suite\))\](?: (?P<text>.*))?$", re.DOTALL)
SIG = re.compile(r"\[(?P<sig>sig-[a-z0-9-]+)\]")
MESSAGE_LINES = 5
MESSAGE_LINE_CHARS = 300
_RANK = {NOT_SELECTED: 0, SKIPPED: 1, PASSED: 2, FAILED: 3}
"""Which of two results for one spec a merge keeps: where it ran, and a failure over a pass."""


@dataclass(frozen=True)
class Case:
    name: str
    """The spec's full text, without ginkgo's `[It] ` prefix."""
    sig: str
    """`sig-api-machinery`, ...; `unknown` for a name with no `[sig-...]` tag."""
    result: str
    """passed, failed, skipped (while running, with a reason) or not-selected."""
    status: str
    """Ginkgo's own state (failed, timedout, panicked, ...)."""
    seconds: float
    message: str
    """The failure's (or skip reason's) first lines."""
    suite_node: bool = False


@dataclass(frozen=True)
class Junit:
    cases: list[Case]
    """The specs, in the order first seen."""
    suite_nodes: list[Case]
    files: list[Path]
    properties: dict[str, str]
    """The first report's suite properties (FocusStrings, SkipStrings, ...)."""


def junit_files(paths: Iterable[Path]) -> list[Path]:
    """The files named, and the `junit*.xml` files under the folders named."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(path.rglob("junit*.xml"))
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    return found


def first_lines(text: str) -> str:
    lines = [line.rstrip()[:MESSAGE_LINE_CHARS] for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[:MESSAGE_LINES])


@dataclass(frozen=True)
class Selection:
    """A report's focus and skip (its suite properties), to tell the specs left out from the
    selected ones that never ran: after a suite timeout or an interrupt, ginkgo reports both
    as `<skipped message="skipped"/>`.  Ginkgo joins several focus (or skip) expressions with
    commas; the runner passes one of each, so the property is read as one expression (one
    that Python's `re` cannot read selects nothing: those specs stay "left out")."""

    focus: re.Pattern[str] | None
    skip: re.Pattern[str] | None
    serial: bool | None
    """The runner's label filter (`Serial`, `!Serial`: the `[Serial]` tag); None: none, or another."""
    why: str
    """Why the selected ones did not run (SpecialSuiteFailureReason)."""

    @classmethod
    def of(cls, properties: dict[str, str]) -> Selection:
        return cls(
            _pattern(properties.get("FocusStrings", "")),
            _pattern(properties.get("SkipStrings", "")),
            {"Serial": True, "!Serial": False}.get(properties.get("LabelFilter", "")),
            properties.get("SpecialSuiteFailureReason", ""),
        )

    def selects(self, text: str) -> bool:
        return (
            self.focus is not None
            and self.focus.search(text) is not None
            and (self.skip is None or self.skip.search(text) is None)
            and (self.serial is None or self.serial == ("[Serial]" in text))
        )


def _pattern(text: str) -> re.Pattern[str] | None:
    try:
        return re.compile(text) if text else None
    except re.error:
        return None


def parse_case(element: ET.Element, selection: Selection | None = None) -> Case:
    raw = element.get("name", "")
    m = NODE.match(raw)
    node, text = (m["node"], m["text"] or "") if m else ("It", raw)
    status = element.get("status", "")
    failure = element.find("failure")
    if failure is None:
        failure = element.find("error")
    skipped = element.find("skipped")
    message = ""
    if failure is not None:
        result = FAILED
        message = first_lines(failure.get("message") or failure.text or failure.get("type") or "")
    elif skipped is not None or status in ("skipped", "pending"):
        reason = (skipped.get("message", "") if skipped is not None else "").strip()
        if reason.startswith("skipped - "):
            result, message = SKIPPED, first_lines(reason.removeprefix("skipped - "))
        elif selection is not None and node == "It" and selection.selects(text):
            result, message = SKIPPED, f"{NOT_RUN} {selection.why or 'the suite ended before it'}"
        else:
            result = NOT_SELECTED
    elif status in FAILED_STATUSES:
        result = FAILED
    else:
        result = PASSED
    sig = SIG.search(text)
    return Case(
        name=text or f"[{node}]",
        sig=sig["sig"] if sig else "unknown",
        result=result,
        status=status or result,
        seconds=_seconds(element.get("time")),
        message=message,
        suite_node=node in SUITE_NODES,
    )


def read(paths: Iterable[Path]) -> Junit:
    """Every spec of the reports under `paths`, merged; a file that is not ginkgo's JUnit is a
    usage error naming it."""
    files = junit_files(paths)
    if not files:
        raise UsageError("no JUnit report (junit*.xml) found in " + ", ".join(str(p) for p in paths))
    merged: dict[tuple[str, int], Case] = {}
    suite_nodes: list[Case] = []
    properties: dict[str, str] = {}
    for file in files:
        try:
            root = ET.parse(file).getroot()
        except (ET.ParseError, OSError) as e:
            raise UsageError(f"{file}: not a JUnit XML report: {e}") from None
        if root.tag not in ("testsuites", "testsuite"):
            raise UsageError(f"{file}: not a JUnit XML report (its root is <{root.tag}>)")
        suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
        seen: dict[str, int] = {}
        for suite in suites:
            own = {p.get("name", ""): p.get("value", "") for p in suite.iter("property")}
            properties = properties or own
            selection = Selection.of(own)
            for element in suite.findall("testcase"):
                case = parse_case(element, selection)
                if case.suite_node:
                    suite_nodes.append(case)
                    continue
                # some specs share their full text: the n-th of a name in one report merges
                # with the n-th in another, and none is lost
                key = (case.name, seen.get(case.name, 0))
                seen[case.name] = key[1] + 1
                have = merged.get(key)
                if have is None or _RANK[case.result] > _RANK[have.result]:
                    merged[key] = case
    return Junit(list(merged.values()), suite_nodes, files, properties)


def _seconds(text: str | None) -> float:
    try:
        return max(0.0, float(text or 0))
    except ValueError:
        return 0.0
