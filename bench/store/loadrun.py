"""The driver's side of the load generators: start them, time them, collect and merge results."""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.store import procs

STARTUP_S = 1.5
"""Time a load generator gets to start Python, import its client and connect before load
starts, where the schedule is fixed before it starts (open loops, watchers, failover); closed
loops start together instead (start_together)."""

READY_TIMEOUT_S = 60.0
"""How long start_together waits for a round's generators to say they are ready."""

START_MARGIN_S = 0.05
"""From the last generator's "ready" to t_start: time for each to read its "go" line."""


class LoadError(Exception):
    """A load generator failed or did not report in time."""


class LoadProcess:
    """A load generator process: `module` reads the JSON spec on stdin, prints its result on stdout."""

    def __init__(self, spec: dict[str, Any], log: Path, module: str = "bench.store.loadgen") -> None:
        self.spec = spec
        self.proc = procs.spawn(
            [sys.executable, "-m", module],
            log=log,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=str(Path(__file__).resolve().parents[2]),
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(spec).encode() + b"\n")
        self.proc.stdin.flush()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ready(self, deadline: float) -> None:
        """Wait (until monotonic `deadline`) for its "ready" line: a spec with `barrier` says it
        once everything before its first request is done; a generator that failed first says
        its error instead, which is raised."""
        assert self.proc.stdout is not None
        while not select.select([self.proc.stdout], [], [], max(0.0, min(0.25, deadline - time.monotonic())))[0]:
            if time.monotonic() >= deadline:
                self._abandon()
                raise LoadError(f"load generator {self.proc.pid} ({self.spec['mode']}) was not ready in time")
        line = self.proc.stdout.readline().decode(errors="replace").strip()
        if line == "ready":
            return
        try:
            said = json.loads(line).get("error", line) if line else ""
        except (ValueError, AttributeError):
            said = line
        self._abandon()
        raise LoadError(
            f"load generator {self.proc.pid} ({self.spec['mode']}) ended before it was ready"
            f" (exit {self.proc.poll()}): {said[:300] or 'nothing said'}"
        )

    def _abandon(self) -> None:
        """Kill it and close its pipes: it will not be asked for a result."""
        procs.kill(self.proc.pid, wait=1.0)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.proc.stdin = None

    def go(self, t: dict[str, float]) -> None:
        """Give a ready generator its schedule."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"go {t['t_start']!r} {t['t_measure']!r} {t['t_end']!r}\n".encode())
        self.proc.stdin.flush()

    def stop(self) -> None:
        """Ask it to stop now (it finishes its window early)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write(b"stop\n")
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            self.proc.stdin = None  # communicate() must not flush it again

    def result(self, timeout: float) -> dict[str, Any]:
        """Its JSON result; closes stdin (so call it once the window is over, or after stop())."""
        self.stop()
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            procs.kill(self.proc.pid)
            raise LoadError(
                f"load generator {self.proc.pid} ({self.spec['mode']}) did not report in {timeout:.0f}s"
            ) from None
        finally:
            procs.kill(self.proc.pid, wait=1.0)
        lines = out.decode().strip().splitlines()
        if not lines:
            raise LoadError(f"load generator ({self.spec['mode']}) printed nothing; exit {self.proc.returncode}")
        res: dict[str, Any] = json.loads(lines[-1])
        if "error" in res:
            raise LoadError(f"load generator ({self.spec['system']} {self.spec['mode']}): {res['error']}")
        return res


def schedule(t_start: float, warmup: float, duration: float) -> dict[str, float]:
    """t_start/t_measure/t_end: load from t_start, counted after `warmup`, for `duration`."""
    return {"t_start": t_start, "t_measure": t_start + warmup, "t_end": t_start + warmup + duration}


def timing(warmup: float, duration: float) -> dict[str, float]:
    """The schedule of a run starting after the load generators' start-up time."""
    return schedule(time.monotonic() + STARTUP_S, warmup, duration)


def start_together(gens: list[LoadProcess], warmup: float, duration: float) -> dict[str, float]:
    """Wait until every generator (specs with `barrier`) is ready, then start them all at once:
    the schedule, as timing() makes it, counted from now instead of from a guess."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    for g in gens:
        g.ready(deadline)
    t = schedule(time.monotonic() + START_MARGIN_S, warmup, duration)
    for g in gens:
        g.go(t)
    return t


def wait_until(t: float, tick: Callable[[], None] | None = None) -> None:
    """Sleep until monotonic time `t`, calling `tick` (progress display) every 0.25 s."""
    while True:
        left = t - time.monotonic()
        if left <= 0:
            return
        if tick is not None:
            tick()
        time.sleep(min(0.25, left))


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def merge_closed_loop(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum ops and CPU over the processes of one measurement; latency percentiles over all."""
    ops = sum(r["ops"] for r in results)
    window = max(r["window_s"] for r in results)
    lat = sorted(x for r in results for x in r["latencies_s"])
    return {
        "ops": ops,
        "ops_per_s": ops / window if window else 0.0,
        "errors": sum(r["errors"] for r in results),
        "first_error": next((r["first_error"] for r in results if r.get("first_error")), ""),
        "p50_ms": percentile(lat, 0.50) * 1e3,
        "p99_ms": percentile(lat, 0.99) * 1e3,
        "max_ms": (lat[-1] * 1e3) if lat else 0.0,
        "window_s": window,
        "client_cpu_s": sum(r["client_cpu_s"] for r in results),
        "client_cpu_pct": sum(r["client_cpu_pct"] for r in results),
        "client_processes": len(results),
    }


def server_cpu(pids: list[int]) -> float:
    return sum(procs.cpu_seconds(p) for p in pids)
