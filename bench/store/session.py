"""What every case-by-case benchmark run does around its cases (standard library only: the
`raftkube` command imports the bench CLIs, which must load without the bench extra).

A `Session` makes the run's temp dir and progress line, turns SIGTERM into KeyboardInterrupt
so Ctrl-C and `kill` stop alike, runs each case so that one failing case is recorded and the
others still run, kills every process a case started, and at the end removes the temp dir
unless something failed or `keep` was asked (then it says where the logs are).  `write`
saves the JSON, prints the table and draws the PNG (or says why it could not).
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from bench.store import procs
from bench.store.progress import Progress


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


class Session:
    def __init__(self, name: str, keep: bool = False) -> None:
        self.name = name
        self.keep = keep
        self.root = Path(tempfile.mkdtemp(prefix=f"raftkube-bench-{name}-"))
        self.progress = Progress()
        self.results: dict[str, Any] = {}
        self.failed: dict[str, str] = {}
        self.started = time.monotonic()
        self._old: Any = None
        self._ok = False

    def __enter__(self) -> Session:
        self._old = signal.signal(signal.SIGTERM, _on_signal)
        return self

    def case(self, key: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """Run one case; its result, or None when it failed (recorded, the run goes on)."""
        try:
            result = run()
        except KeyboardInterrupt:
            raise
        except Exception as e:
            self.progress.end(f"FAILED: {type(e).__name__}: {e}")
            self.failed[key] = f"{type(e).__name__}: {e}"
            return None
        finally:
            procs.kill_all()
        self.results[key] = result
        return result

    def incomplete(self) -> bool:
        return any(not r.get("complete", True) for r in self.results.values())

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        procs.kill_all()
        signal.signal(signal.SIGTERM, self._old)
        self.progress.end()
        if kind is None and not self.keep and not self.failed and not self.incomplete():
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            print(f"logs kept in {self.root}", file=sys.stderr)

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.started

    def write(
        self,
        doc: dict[str, Any],
        json_path: Path,
        png_path: Path,
        render: Callable[[dict[str, Any]], str],
        plot: Callable[[dict[str, Any], Path], None],
    ) -> int:
        """Save, print and plot; the exit status (1 when a case failed or did not complete)."""
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(doc, indent=2) + "\n")
        print(render(doc))
        try:
            plot(doc, png_path)
            print(f"\nwritten {json_path} and {png_path}")
        except ImportError as e:
            print(f"\nwritten {json_path}; no plot ({e}: pip install -e '.[bench]')")
        for key, err in self.failed.items():
            print(f"{key} failed: {err}", file=sys.stderr)
        return 1 if self.failed or self.incomplete() else 0
