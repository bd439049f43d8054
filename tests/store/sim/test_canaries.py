"""Canaries: deliberately broken variants of the core must be caught by the simulator.

Each canary is a test-only switch in `store.raft.raft.Canary`.  The sweep runs schedules
with the canary on until one fails; a canary that survives its whole budget means the
simulator has gone blind to that class of bug, and this test fails.
"""

from __future__ import annotations

import dataclasses

import pytest

from store.raft import Canary
from tests.store.sim.sweep import Schedule, schedule, sweep


def _figure8(seed: int) -> Schedule:
    # Old-term entries only become dangerous with many leader changes and appends that
    # carry one entry each: a dedicated profile and longer runs.
    return Schedule(seed, nodes=3, profile="figure8", election_tick=4, steps=1000)


CASES = {
    Canary.COMMIT_OLD_TERM_BY_COUNTING: (_figure8, 3000),
    Canary.FORGET_VOTE_ON_RESTART: (schedule, 1000),
    Canary.VOTE_FOR_SHORTER_LOG: (schedule, 1000),
}


@pytest.mark.parametrize("canary", list(CASES), ids=lambda c: c.value)
def test_simulator_catches_canary(canary: Canary) -> None:
    """Some schedule within the budget reports a violation with the canary switched on."""
    make, budget = CASES[canary]
    canaries = frozenset({canary})
    caught = None
    batch = 200
    for start in range(0, budget, batch):
        outcomes = sweep([make(s) for s in range(start, start + batch)], canaries, stop_on_first=True)
        caught = next((o for o in outcomes if o.violation), None)
        if caught is not None:
            break
    assert caught is not None, f"canary {canary.value} survived {budget} schedules: the simulator cannot see it"
    print(f"{canary.value}: caught by seed {caught.schedule.seed}: {caught.violation}")
    print(f"  replay: {caught.schedule.command(canaries)}")


def test_correct_core_passes_the_canary_schedules() -> None:
    """The figure8 schedules that catch the canary pass with the correct core (no false alarm)."""
    outcomes = sweep([_figure8(s) for s in range(300)])
    assert [o.violation for o in outcomes if o.violation] == []


def test_schedule_command_replays_overrides() -> None:
    """The replay command names every parameter of the schedule, canaries included."""
    s = dataclasses.replace(schedule(7), profile="churn")
    cmd = s.command(frozenset({Canary.VOTE_FOR_SHORTER_LOG}))
    assert "--seed 7" in cmd and "--profile churn" in cmd and "--canary vote-for-shorter-log" in cmd
