"""Run simulation seeds from the command line: the reproduction command printed by failures.

python -m tests.sim.run --seed 42 --nodes 3 --steps 300 --trace
python -m tests.sim.run --seeds 0:500 --nodes 5
"""

from __future__ import annotations

import argparse
import sys
import time

from store.raft import Canary
from tests.sim.cluster import Simulator
from tests.sim.invariants import InvariantViolation


def repro_command(seed: int, nodes: int, steps: int, canaries: frozenset[Canary]) -> str:
    extra = "".join(f" --canary {c.value}" for c in sorted(canaries, key=lambda c: c.value))
    return f"python -m tests.sim.run --seed {seed} --nodes {nodes} --steps {steps}{extra} --trace"


def run_seed(seed: int, nodes: int, steps: int, canaries: frozenset[Canary] = frozenset(), trace: bool = False):
    sim = Simulator(seed=seed, n_nodes=nodes, canaries=canaries, trace=trace)
    try:
        return sim.run(steps), None, sim
    except InvariantViolation as e:
        return None, e, sim


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int)
    p.add_argument("--seeds", help="range lo:hi")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--canary", action="append", default=[], choices=[c.value for c in Canary])
    p.add_argument("--trace", action="store_true", help="print the full trace of each seed")
    p.add_argument("--tail", type=int, default=60, help="trace lines to show on failure")
    args = p.parse_args(argv)
    canaries = frozenset(Canary(c) for c in args.canary)
    if args.seed is not None:
        seeds = range(args.seed, args.seed + 1)
    elif args.seeds:
        lo, hi = (int(x) for x in args.seeds.split(":"))
        seeds = range(lo, hi)
    else:
        p.error("give --seed N or --seeds LO:HI")
    failures = 0
    t0 = time.perf_counter()
    for seed in seeds:
        result, err, sim = run_seed(seed, args.nodes, args.steps, canaries, trace=args.trace)
        if err is None:
            if args.trace:
                print("\n".join(sim.log))
            print(f"seed {seed}: ok {result}")
            continue
        failures += 1
        if not args.trace:
            _, _, sim = run_seed(seed, args.nodes, args.steps, canaries, trace=True)
            lines = sim.log[-args.tail :]
        else:
            lines = sim.log
        print("\n".join(lines))
        print(f"seed {seed}: VIOLATION {err}")
        print(f"  reproduce: {repro_command(seed, args.nodes, args.steps, canaries)}")
    print(f"{len(seeds)} seeds, {failures} failed, {time.perf_counter() - t0:.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
