"""Run simulation seeds from the command line; failures print the command that replays them.

python -m tests.store.sim.run --seed 42 --trace          # one seed, as in the standard sweep
python -m tests.store.sim.run --seeds 0:500              # a sweep
python -m tests.store.sim.run --seeds 0:500 --canary vote-for-shorter-log
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from store.raft import Canary
from tests.store.sim.cluster import PROFILES
from tests.store.sim.sweep import Schedule, run_schedule, schedule, sweep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, help="run one seed")
    p.add_argument("--seeds", help="run the seeds LO:HI (in parallel)")
    p.add_argument("--nodes", type=int, choices=(3, 5), help="override the cluster size")
    p.add_argument("--profile", choices=sorted(PROFILES), help="override the fault profile")
    p.add_argument("--election-tick", type=int, help="override the election timeout (ticks)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--canary", action="append", default=[], choices=[c.value for c in Canary])
    p.add_argument("--trace", action="store_true", help="print the whole trace of a single seed")
    p.add_argument("--tail", type=int, default=80, help="trace lines shown for a failure")
    args = p.parse_args(argv)
    canaries = frozenset(Canary(c) for c in args.canary)

    def configured(seed: int) -> Schedule:
        s = schedule(seed, args.steps)
        overrides = {
            k: v
            for k, v in (("nodes", args.nodes), ("profile", args.profile), ("election_tick", args.election_tick))
            if v is not None
        }
        return dataclasses.replace(s, **overrides)

    if args.seed is not None:
        outcome, sim = run_schedule(configured(args.seed), canaries, trace=True)
        lines = sim.log if args.trace or outcome.violation is None else sim.log[-args.tail :]
        if args.trace or outcome.violation:
            print("\n".join(lines))
        print(outcome.violation or outcome.result)
        return 1 if outcome.violation else 0
    if not args.seeds:
        p.error("give --seed N or --seeds LO:HI")
    lo, hi = (int(x) for x in args.seeds.split(":"))
    t0 = time.perf_counter()
    outcomes = sweep([configured(s) for s in range(lo, hi)], canaries)
    failed = [o for o in outcomes if o.violation]
    for o in failed:
        print(f"seed {o.schedule.seed}: {o.violation}\n  replay: {o.schedule.command(canaries)}")
    print(f"{len(outcomes)} schedules of {args.steps} steps, {len(failed)} failed, {time.perf_counter() - t0:.1f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
