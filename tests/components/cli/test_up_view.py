"""What `raftkube up` shows in the foreground: new log lines merged and prefixed with their
part (only what was written after it started, whole lines, bounded), and the status table
again only when a role or health changed."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from components.cli.up_view import MAX_LINE, LiveStatus, MergedLog


def test_merged_log_shows_new_whole_lines_prefixed(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("old line, not news\n")
    out = io.StringIO()
    merged = MergedLog({"store-1": a, "scheduler": b}, out)
    with a.open("a") as f:
        f.write("elected leader\nhalf a li")
    b.write_text("bound 3 pods\n")
    merged.poll()
    assert out.getvalue() == "store-1   | elected leader\nscheduler | bound 3 pods\n"
    with a.open("a") as f:
        f.write("ne\n" + "x" * (MAX_LINE + 50) + "\n")
    merged.poll()
    lines = out.getvalue().splitlines()
    assert lines[2] == "store-1   | half a line"
    assert lines[3] == "store-1   | " + "x" * MAX_LINE  # a huge line is cut
    b.write_text("")  # replaced (truncated): read again from its start
    merged.poll()
    b.write_text("after truncation\n")
    merged.poll()
    assert out.getvalue().splitlines()[-1] == "scheduler | after truncation"


def test_live_status_shows_the_table_when_it_changed() -> None:
    now = [0.0]
    table: list[dict[str, Any]] = [{"part": "store member 1", "role": "leader", "healthy": True, "pid": 1}]
    shown: list[list[dict[str, Any]]] = []
    live = LiveStatus(lambda: [dict(r) for r in table], shown.append, every=2.0, clock=lambda: now[0])
    live.seen(table)
    live.poll()
    assert shown == []  # nothing changed since up printed it
    table[0]["role"] = "follower"
    now[0] = 1.0
    live.poll()
    assert shown == []  # not due yet
    now[0] = 2.5
    live.poll()
    assert [r["role"] for r in shown[-1]] == ["follower"]
    now[0] = 5.0
    live.poll()
    assert len(shown) == 1  # the same again: not shown again
