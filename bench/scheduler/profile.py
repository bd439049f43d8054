"""--profile: py-spy records the scheduler while it schedules, and the record is summarised.

py-spy attaches by pid once the scheduler's informers are synced and is stopped (SIGINT, on
which it writes its file) after the last bind, so the record holds the scheduling alone.
The summary lists the frames with the most samples on top of the stack (self) and the
scheduler's and client library's functions with the most samples below them (inclusive):
together they say where the time goes.  (bench.apiserver.profile summarises the same raw
format, but counts only the apiserver's and the store's code as its own.)
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.store import procs

RATE = 97
"""Samples per second (prime, so as not to beat with periodic work)."""
OUR_CODE = ("components/",)
ENTRY = ("components/scheduler/main.py", "components/scheduler/__main__.py")
"""Entry points under every sample: left out of the inclusive list, which they would top."""
_LINE = re.compile(r"^(.*) (\d+)$")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def frame_name(frame: str) -> tuple[str, str]:
    """('function (short/path.py)', short path) of one raw frame, line number dropped."""
    m = _FRAME.match(frame.strip())
    if m is None:
        return frame.strip(), ""
    path = m["file"]
    for marker in ("site-packages/", "/lib/python3", "/work/main/", "/work/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    path = re.sub(r"^\.\d+/", "", path)
    return f"{m['func']} ({path})", path


def summarise(raw: str, seconds: float, top: int = 15) -> dict[str, Any]:
    """Top frames by share of samples; busy_pct = samples over what an always-running thread
    would give (py-spy skips idle samples, so that is the main thread's CPU share)."""
    total = 0
    self_: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for line in raw.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        count = int(m[2])
        frames = [frame_name(f) for f in m[1].split(";") if f]
        if not frames:
            continue
        total += count
        self_[frames[-1][0]] += count
        for name in {n for n, path in frames if path.startswith(OUR_CODE) and not path.startswith(ENTRY)}:
            inclusive[name] += count

    def share(c: Counter[str]) -> list[dict[str, Any]]:
        return [{"frame": k, "pct": round(100.0 * v / max(1, total), 1)} for k, v in c.most_common(top)]

    busy = round(100.0 * total / max(1.0, seconds * RATE), 1)
    return {
        "samples": total,
        "seconds": round(seconds, 2),
        "busy_pct": busy,
        "self": share(self_),
        "inclusive": share(inclusive),
    }


class Spy:
    """One py-spy record of one process, started and stopped by pid."""

    def __init__(self, pid: int, out: Path, log: Path) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        out.parent.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.log = log
        argv = [exe, "record", "--pid", str(pid), "--format", "raw", "--rate", str(RATE), "--nonblocking"]
        self.proc = procs.spawn([*argv, "-o", str(out)], log=log)
        self.t0 = time.monotonic()

    def stop(self) -> dict[str, Any]:
        seconds = time.monotonic() - self.t0
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except Exception:
            procs.kill(self.proc.pid)
        procs.kill(self.proc.pid, wait=0.5)
        if not self.out.exists():
            return {"file": str(self.out), "error": f"py-spy wrote nothing (see {self.log})"}
        return {"file": str(self.out)} | summarise(self.out.read_text(), seconds)
