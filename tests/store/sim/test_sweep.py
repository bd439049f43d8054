"""The seed sweep: thousands of random schedules, 3 and 5 nodes, every fault kind.

RAFTKUBE_SIM_SCHEDULES scales the sweep (default 4000 schedules of 300 steps).  A failure
lists every failing seed with the command that replays it with a full trace.
"""

from __future__ import annotations

import os

from tests.store.sim.sweep import schedule, sweep

SCHEDULES = int(os.environ.get("RAFTKUBE_SIM_SCHEDULES", "4000"))
STEPS = 300


def test_seed_sweep_finds_no_violation() -> None:
    """No safety or liveness violation in any schedule; each run made real progress."""
    outcomes = sweep([schedule(seed, STEPS) for seed in range(SCHEDULES)])
    failures = [o for o in outcomes if o.violation]
    report = "\n".join(f"seed {o.schedule.seed}: {o.violation}\n  replay: {o.schedule.command()}" for o in failures)
    assert not failures, f"{len(failures)} of {len(outcomes)} schedules failed:\n{report}"
    assert len(outcomes) == SCHEDULES
    results = [o.result for o in outcomes if o.result is not None]
    # The sweep must exercise what it claims to: faults happened and work got done.
    assert sum(r.proposals_acked for r in results) > SCHEDULES * 5
    assert sum(r.crashes for r in results) > SCHEDULES // 2
    assert sum(r.snapshots_installed for r in results) > SCHEDULES // 20
    assert sum(r.conf_changes for r in results) > SCHEDULES // 20
    assert sum(r.reads_checked for r in results) > SCHEDULES // 2
    assert sum(1 for r in results if r.leaders >= 2) > SCHEDULES // 4
    assert {o.schedule.nodes for o in outcomes} == {3, 5}
