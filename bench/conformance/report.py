"""The conformance summary: JSON (per test and per SIG) and a Markdown table (a row per SIG
and the total), written as `conformance.json` and `conformance.md` into the report folder.

Pass % is passed over every selected spec (passed + failed + skipped): a spec skipped at run
time (say, it wants two schedulable nodes) did not pass either.  The specs focus and skip
left out are only counted (`not_selected`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.conformance.junit import FAILED, NOT_RUN, PASSED, SKIPPED, Case, Junit

JSON_NAME = "conformance.json"
MD_NAME = "conformance.md"


@dataclass(frozen=True)
class Written:
    json: Path
    markdown: Path


def counts(cases: list[Case]) -> dict[str, Any]:
    passed = sum(c.result == PASSED for c in cases)
    failed = sum(c.result == FAILED for c in cases)
    skipped = sum(c.result == SKIPPED for c in cases)
    selected = passed + failed + skipped
    pct = round(100.0 * passed / selected, 1) if selected else None
    return {"passed": passed, "failed": failed, "skipped": skipped, "pass_pct": pct}


def summarize(junit: Junit, run: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON document.  `run`: what the runner knows and the reports do not (flags, the
    cluster, whether the run was cut short)."""
    selected = [c for c in junit.cases if c.result in (PASSED, FAILED, SKIPPED)]
    sigs = sorted({c.sig for c in selected})
    return {
        "generated": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "run": run or {},
        "sources": [str(f) for f in junit.files],
        "focus": junit.properties.get("FocusStrings", ""),
        "skip": junit.properties.get("SkipStrings", ""),
        "total": counts(selected),
        "not_selected": len(junit.cases) - len(selected),
        "not_run": sum(c.message.startswith(NOT_RUN) for c in selected if c.result == SKIPPED),
        "sigs": {sig: counts([c for c in selected if c.sig == sig]) for sig in sigs},
        "suite_failures": [
            {"node": c.name, "status": c.status, "message": c.message} for c in junit.suite_nodes if c.result == FAILED
        ],
        "tests": [
            {
                "name": c.name,
                "sig": c.sig,
                "result": c.result,
                "status": c.status,
                "seconds": c.seconds,
                "message": c.message,
            }
            for c in selected
        ],
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _row(name: str, c: dict[str, Any]) -> str:
    return f"| {name} | {c['passed']} | {c['failed']} | {c['skipped']} | {_pct(c['pass_pct'])} |"


def markdown(summary: dict[str, Any]) -> str:
    """The per-SIG table, then each failure's first line (the table alone says nothing of why)."""
    lines = ["# Conformance", ""]
    run = summary.get("run") or {}
    said = [f"generated {summary['generated']}"]
    if run.get("e2e_version"):
        said.append(f"e2e.test {run['e2e_version']}")
    if summary["focus"]:
        said.append(f"focus `{summary['focus']}`")
    if summary["skip"]:
        said.append(f"skip `{summary['skip']}`")
    if run.get("parallel"):
        said.append(f"{run['parallel']} process(es)")
    if run.get("cut"):
        said.append(f"**cut short**: {run['cut']}")
    lines += ["; ".join(said) + ".", ""]
    lines += ["| SIG | passed | failed | skipped | pass % |", "|---|---:|---:|---:|---:|"]
    lines += [_row(sig, c) for sig, c in summary["sigs"].items()]
    lines.append(_row("**total**", summary["total"]))
    lines += ["", f"{summary['not_selected']} specs were not selected (focus and skip)."]
    if summary["not_run"]:
        lines[-1] += f"  {summary['not_run']} selected specs never ran (the run was cut short: counted as skipped)."
    for failure in summary["suite_failures"]:
        first = failure["message"].splitlines()[0] if failure["message"] else ""
        lines += ["", f"Suite node {failure['node']} {failure['status']}: {first}"]
    failed = [t for t in summary["tests"] if t["result"] == FAILED]
    if failed:
        lines += ["", "## Failures", ""]
        for t in failed:
            first = t["message"].splitlines()[0] if t["message"] else t["status"]
            lines.append(f"- `{t['name']}`: {first}")
    return "\n".join(lines) + "\n"


def write(folder: Path, summary: dict[str, Any]) -> Written:
    folder.mkdir(parents=True, exist_ok=True)
    out = Written(folder / JSON_NAME, folder / MD_NAME)
    out.json.write_text(json.dumps(summary, indent=2) + "\n")
    out.markdown.write_text(markdown(summary))
    return out
