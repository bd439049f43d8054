"""`raftkube chaos`: run fault scenarios against fresh local stores and give a verdict.

Each scenario is one fault on a fresh cluster under the recorded workload (see
scenario.py).  With `--duration`, scenarios are drawn (by seed) from the chosen faults until
the time is up; without it, each chosen fault runs once.  The exit code is 0 only when every
check of every scenario passed; a failing scenario prints the command that reruns it.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

from machinery.process.command import UsageError
from machinery.process.hosts import can_make_hosts
from store.chaos.faults import FAULTS, GROUPS, expand
from store.chaos.report import first_violation_hint, verdict_table, write_scenario, write_summary
from store.chaos.scenario import CANARIES, PROFILES, Result, Scenario, run_scenario


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The `chaos` command; returned so that the CLI can hang `chaos cluster` below it."""
    p = sub.add_parser(
        "chaos",
        help="kill, pause and partition store members under a recorded workload; check nothing was lost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--members", type=int, default=3, choices=(3, 5))
    p.add_argument("--duration", type=float, default=0.0, help="seconds of scenarios drawn at random (0: each once)")
    p.add_argument(
        "--faults",
        default="kill,pause,partition",
        help=f"comma-separated fault groups ({', '.join(GROUPS)}) or fault names (see --list)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the first scenario (default: random)")
    p.add_argument("--report", type=Path, default=None, help="report directory (default: chaos-report-<time>)")
    p.add_argument("--profile", choices=sorted(PROFILES), default="fast", help="Raft timing (default 100/1000 ms)")
    p.add_argument("--canary", choices=CANARIES, default="", help="run members in a test-only unsafe mode")
    p.add_argument(
        "--snapshot-count",
        type=int,
        default=Scenario.snapshot_count,
        help=f"applied entries between two member snapshots (default {Scenario.snapshot_count})",
    )
    p.add_argument("--traffic", type=float, default=1.0, help="seconds of traffic before and after the fault")
    p.add_argument(
        "--api",
        choices=("native", "etcd"),
        default="native",
        help="the clients' front door: our protocol, or the members' etcd gRPC API (watchers stay on ours)",
    )
    p.add_argument(
        "--hosts",
        choices=("local", "netns"),
        default=None,
        help="netns (the default as root): each member on a host of its own with mutual TLS on, faults from "
        "the kernel (nftables; `delay` needs tc netem); local (the default otherwise): members on 127.0.0.1 "
        "in plaintext, faults from proxies that read Raft frames",
    )
    p.add_argument("--hosts-subnet", default="10.77.0.0/24", help="the LAN of --hosts netns")
    p.add_argument("--list", action="store_true", help="list the faults and exit")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    if args.list:
        for group, names in GROUPS.items():
            print(f"{group}: {', '.join(names)}")
        return 0
    try:
        faults = expand([f.strip() for f in args.faults.split(",") if f.strip()])
    except ValueError as e:
        raise UsageError(str(e)) from e
    if not faults:
        raise UsageError("--faults names no fault")
    if args.hosts is None:
        args.hosts = "netns" if can_make_hosts() is None else "local"
    if args.hosts == "netns":
        why = can_make_hosts()
        if why is not None:
            raise UsageError(f"--hosts netns: {why}")
    if args.duration < 0 or args.traffic <= 0 or args.snapshot_count < 1:
        raise UsageError("--duration must be >= 0, --traffic > 0 and --snapshot-count >= 1")
    seed = args.seed if args.seed is not None else random.randrange(1 << 20)
    root = args.report or Path(f"chaos-report-{time.strftime('%Y%m%d-%H%M%S')}")
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"report directory {root} is not empty")
    root.mkdir(parents=True, exist_ok=True)
    plan = _plan(faults, seed, args.duration)
    results: list[Result] = []
    t0 = time.monotonic()
    via = ", through the etcd API" if args.api == "etcd" else ""
    via += ", each member on a host of its own, TLS on" if args.hosts == "netns" else ""
    print(f"chaos: {args.members} members, profile {args.profile}, faults {','.join(faults)}, seed {seed}{via}")
    print(f"report: {root}")
    for i, (fault, s) in enumerate(plan):
        if args.duration and time.monotonic() - t0 > args.duration:
            break
        sc = Scenario(
            fault,
            s,
            args.members,
            args.profile,
            warmup=args.traffic,
            after=args.traffic,
            canary=args.canary,
            snapshot_count=args.snapshot_count,
            api=args.api,
            hosts=args.hosts,
            hosts_subnet=args.hosts_subnet,
        )
        folder = root / f"{i:03d}-{fault.replace(':', '-')}-{s}"
        r = asyncio.run(run_scenario(sc, folder, progress=lambda m: print(f"  {m}", flush=True)))
        write_scenario(r)
        results.append(r)
        mark = "PASS" if r.passed else "FAIL " + ",".join(sorted({v.check for v in r.violations}))
        print(f"[{i + 1}] {sc.name}: {r.ops} ops, {r.errors} not ok: {mark}", flush=True)
        write_summary(results, root)
    print()
    print(verdict_table(results))
    hint = first_violation_hint(results)
    if hint:
        print(hint)
    ok = bool(results) and all(r.passed for r in results)
    print(f"\n{'every check passed' if ok else 'VIOLATIONS FOUND'}; report in {root}", file=sys.stdout)
    return 0 if ok else 1


def _plan(faults: list[str], seed: int, duration: float) -> list[tuple[str, int]]:
    """Each fault once (seed, seed+1, ...), or with a duration a long seeded random draw."""
    if not duration:
        return [(f, seed + i) for i, f in enumerate(faults)]
    rng = random.Random(seed)
    return [(rng.choice(faults), seed + i) for i in range(10_000)]


__all__ = ["FAULTS", "register", "run"]
