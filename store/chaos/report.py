"""What a chaos run leaves behind: per-scenario histories, a readable account of the first
violation, a summary, and the verdict table printed at the end.

Layout of a report directory:

    summary.json                      every scenario's figures and verdict
    <scenario>/operations.jsonl       one operation per line (request, outcome, response)
    <scenario>/watches.jsonl          one watch stream per line
    <scenario>/violations.txt         every violation; the first one in full, with its context
    <scenario>/data/store/member-N/   each member's data dir, apply log and member.log
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from store.chaos.history import Operation, Violation, WatchRecord
from store.chaos.scenario import Result


def _plain(x: Any) -> Any:
    """JSON-able form of requests, responses and events (bytes shown as text where they are)."""
    if isinstance(x, bytes):
        try:
            return x.decode()
        except UnicodeDecodeError:
            return x.hex()
    if isinstance(x, float) and math.isinf(x):
        return None
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if hasattr(x, "__dataclass_fields__"):
        return {"type": type(x).__name__, **{k: _plain(getattr(x, k)) for k in x.__dataclass_fields__}}
    if hasattr(x, "value") and hasattr(x, "name"):  # enums
        return x.name
    return x


def op_line(o: Operation) -> str:
    return json.dumps(_plain(o), separators=(",", ":"))


def write_scenario(result: Result) -> None:
    d = result.report_dir
    h = result.history
    if d is None or h is None:
        return
    with (d / "operations.jsonl").open("w") as f:
        for o in h.operations:
            f.write(op_line(o) + "\n")
    with (d / "watches.jsonl").open("w") as f:
        for w in h.watches:
            f.write(json.dumps(_plain(w), separators=(",", ":")) + "\n")
    (d / "violations.txt").write_text(account(result))


def account(result: Result) -> str:
    """Readable: the scenario, how to rerun it, and each violation (the first in detail)."""
    sc = result.scenario
    lines = [
        f"scenario {sc.name}: {'PASSED' if result.passed else 'FAILED'}",
        f"rerun: {sc.rerun_command()}",
        f"fault: {result.fault_account}",
        f"operations: {result.ops} ({result.errors} not ok); load before the fault {result.qps_before:.0f} ops/s",
        "",
    ]
    h = result.history
    if h is not None:
        lines.append("faults (monotonic seconds):")
        lines += [f"  {a:.3f} .. {b:.3f}  {what}" for a, b, what in h.faults]
        lines.append("")
    for i, v in enumerate(result.violations):
        lines.append(f"[{v.check}] {v.message}")
        if i == 0:
            for o in v.operations[:20]:
                lines.append("    " + op_line(o))
        lines.append("")
    return "\n".join(lines) + "\n"


def summary_row(r: Result) -> dict[str, Any]:
    return {
        "scenario": r.scenario.name,
        "fault": r.scenario.fault,
        "canary": r.scenario.canary,
        "seed": r.scenario.seed,
        "passed": r.passed,
        "ops": r.ops,
        "errors": r.errors,
        "violations": [f"{v.check}: {v.message}" for v in r.violations],
        "qps_before": round(r.qps_before, 1),
        "leaderless_s": round(r.leaderless, 3),
        "first_write_after_s": None if r.first_write_after is None else round(r.first_write_after, 3),
        "fault_account": r.fault_account,
        "rerun": r.scenario.rerun_command(),
        "report": str(r.report_dir),
    }


def write_summary(results: list[Result], root: Path) -> None:
    (root / "summary.json").write_text(json.dumps([summary_row(r) for r in results], indent=2) + "\n")


def verdict_table(results: list[Result]) -> str:
    head = ("scenario", "fault", "ops", "errors", "violations", "no leader", "1st write", "verdict")
    rows = [head]
    for r in results:
        checks = sorted({v.check for v in r.violations})
        rows.append(
            (
                r.scenario.name,
                r.scenario.fault,
                str(r.ops),
                str(r.errors),
                ",".join(checks) if checks else "0",
                f"{r.leaderless:.2f}s",
                "-" if r.first_write_after is None else f"{r.first_write_after:.2f}s",
                "PASS" if r.passed else "FAIL",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def first_violation_hint(results: list[Result]) -> str:
    for r in results:
        if r.violations:
            return f"first violation: {r.report_dir}/violations.txt  (rerun: {r.scenario.rerun_command()})"
    return ""


__all__ = ["account", "verdict_table", "write_scenario", "write_summary"]

_ = WatchRecord, Violation  # re-exported types documented in the layout above
