"""--profile: py-spy records the scheduler while it schedules, and the record is summarised.

py-spy attaches by pid once the scheduler's informers are synced and is stopped (SIGINT, on
which it writes its file) after the last bind, so the record holds the scheduling alone.
The summary lists the frames with the most samples on top of the stack (self) and the
scheduler's and client library's functions with the most samples below them (inclusive):
together they say where the time goes (bench.apiserver.profile reads py-spy's raw format).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.apiserver import profile
from bench.store import procs

RATE = 97
"""Samples per second (prime, so as not to beat with periodic work)."""
OUR_CODE = ("components/",)
ENTRY = ("components/scheduler/main.py", "components/scheduler/__main__.py")
"""Entry points under every sample: left out of the inclusive list, which they would top."""


def summarise(raw: str, seconds: float, top: int = 15) -> dict[str, Any]:
    """bench.apiserver.profile's summary, counting the components' code as our own."""
    return profile.summarise(raw, seconds, RATE, top, ours=OUR_CODE, entry_points=ENTRY)


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
