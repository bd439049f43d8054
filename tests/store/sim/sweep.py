"""Seed sweeps: many random schedules, each fully determined by its seed.

`schedule(seed)` derives the whole configuration of a run (cluster size, fault profile,
election timeout, length) from the seed, so a failing seed is reproduced by the seed alone:
`python -m tests.store.sim.run --seed N`.  Sweeps fan out over processes: the runs are
independent and CPU-bound.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from store.raft import Canary
from tests.store.sim.cluster import PROFILES, RunResult, Simulator
from tests.store.sim.invariants import InvariantViolation


@dataclass(frozen=True)
class Schedule:
    seed: int
    nodes: int
    profile: str
    election_tick: int
    steps: int

    def command(self, canaries: frozenset[Canary] = frozenset()) -> str:
        extra = "".join(f" --canary {c.value}" for c in sorted(canaries, key=lambda c: c.value))
        return (
            f"python -m tests.store.sim.run --seed {self.seed} --nodes {self.nodes} --profile {self.profile} "
            f"--election-tick {self.election_tick} --steps {self.steps}{extra} --trace"
        )


def schedule(seed: int, steps: int = 300) -> Schedule:
    """The run a seed stands for in the standard sweep: sizes and profiles alternate."""
    nodes = 3 if seed % 2 == 0 else 5
    profile = ("default", "churn", "default", "figure8")[(seed // 2) % 4]
    election_tick = 10 if (seed // 8) % 2 == 0 else 4
    return Schedule(seed, nodes, profile, election_tick, steps)


@dataclass(frozen=True)
class Outcome:
    schedule: Schedule
    result: RunResult | None
    violation: str | None


def run_schedule(
    s: Schedule, canaries: frozenset[Canary] = frozenset(), trace: bool = False
) -> tuple[Outcome, Simulator]:
    sim = Simulator(
        seed=s.seed,
        n_nodes=s.nodes,
        profile=PROFILES[s.profile],
        election_tick=s.election_tick,
        canaries=canaries,
        trace=trace,
    )
    try:
        return Outcome(s, sim.run(s.steps), None), sim
    except InvariantViolation as e:
        return Outcome(s, None, str(e)), sim


def _run_one(args: tuple[Schedule, frozenset[Canary]]) -> Outcome:
    return run_schedule(*args)[0]


def sweep(
    schedules: list[Schedule],
    canaries: frozenset[Canary] = frozenset(),
    workers: int | None = None,
    stop_on_first: bool = False,
) -> list[Outcome]:
    """Run `schedules` in parallel; with stop_on_first, stop after the first violation (in seed order)."""
    workers = workers or min(4, os.cpu_count() or 1)
    out: list[Outcome] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        chunk = max(1, len(schedules) // (workers * 8))
        for outcome in pool.map(_run_one, [(s, canaries) for s in schedules], chunksize=chunk):
            out.append(outcome)
            if stop_on_first and outcome.violation is not None:
                pool.shutdown(wait=False, cancel_futures=True)
                break
    return out
