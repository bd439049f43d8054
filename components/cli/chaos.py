"""`raftkube chaos` (the store's scenarios, store.chaos.cli) and `raftkube chaos cluster`: the
whole cluster under faults (bench.chaos, loaded only when it runs): an HA control plane from
`up`, users' writes and watches on every apiserver, faults drawn from a seed, and checks over
what was acknowledged, what every watch delivered and the store's own history.

Exit codes: 0 every check passed, 1 a check failed (the report says which and how), 2 bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import time
from pathlib import Path

from machinery.process.command import UsageError
from machinery.process.hosts import can_make_hosts
from store.chaos import cli as store_chaos

CANARIES = ("drop-watch-event", "ack-before-commit", "scheduler-ignores-lease")
"""Broken modes the run must catch (machinery/canary.py): apiservers whose watch cache loses an
event for its watchers, or that acknowledge some ConfigMap updates they never write; schedulers
that schedule without holding their Lease."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chaos = store_chaos.register(sub)
    inner = chaos.add_subparsers(dest="target", metavar="cluster", required=False)
    p = inner.add_parser(
        "cluster",
        help="the whole cluster under faults: nothing acknowledged lost, every watch whole",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--seed", type=int, default=None, help="the seed of the faults and the workload (default: random)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of workload under faults (default 60)")
    p.add_argument(
        "--faults",
        default="kill,pause",
        help="fault groups (kill, pause, disk, net, unplug, store, control-plane) or names",
    )
    p.add_argument("--mixed", action="store_true", help="half the time two faults at once")
    p.add_argument(
        "--hosts",
        choices=("local", "netns"),
        default="local",
        help="netns (root): the store members, apiservers, controller-managers, schedulers and kubelets each on"
        " a host of its own, for the `net` faults",
    )
    p.add_argument("--apiservers", type=int, default=2, choices=(2, 3), help="apiservers behind the balancer")
    p.add_argument("--writers", type=int, default=4, help="clients writing ConfigMaps (default 4)")
    p.add_argument("--canary", choices=CANARIES, default="", help="run the apiservers in a broken mode it must catch")
    p.add_argument("--report", type=Path, default=None, help="report directory (default: chaos-cluster-<time>)")
    p.add_argument("--keep", action="store_true", help="keep the cluster's data dir (default: removed on a pass)")
    p.add_argument("--list", action="store_true", help="list the faults and exit")
    p.set_defaults(run=run_cluster)


def run_cluster(args: argparse.Namespace) -> int:
    from bench.chaos import faults, report  # noqa: PLC0415 - the harness loads only when it runs
    from bench.chaos.run import Settings, run  # noqa: PLC0415

    if args.list:
        for group, names in faults.GROUPS.items():
            print(f"{group}: {', '.join(names)}")
        return 0
    try:
        chosen = faults.expand(args.faults)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if not 5 <= args.duration <= 3600:
        raise UsageError(f"--duration must be from 5 to 3600 seconds, got {args.duration:g}")
    network = [f for f in chosen if f in faults.GROUPS["net"]]
    if network and args.hosts != "netns":
        raise UsageError(f"--faults {','.join(network)}: network faults need --hosts netns (root)")
    if args.hosts == "netns" and (why := can_make_hosts()) is not None:
        raise UsageError(f"--hosts netns: {why}")
    if not 1 <= args.writers <= 64:
        raise UsageError(f"--writers must be from 1 to 64, got {args.writers}")
    root = args.report or Path(f"chaos-cluster-{time.strftime('%Y%m%d-%H%M%S')}")
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"report directory {root} is not empty")
    seed = args.seed if args.seed is not None else random.randrange(1 << 20)
    settings = Settings(
        seed,
        args.duration,
        chosen,
        writers=args.writers,
        apiservers=args.apiservers,
        canary=args.canary,
        mixed=args.mixed,
        hosts=args.hosts,
    )
    root.mkdir(parents=True, exist_ok=True)
    data_dir = (root / "cluster").resolve()
    print(f"chaos cluster: seed {seed}, {args.duration:g} s of {','.join(chosen)}; report {root}", flush=True)
    outcome = asyncio.run(run(settings, data_dir))
    path = report.write(outcome, root)
    for c in outcome.checks:
        print(f"  {'pass' if c.passed else 'FAIL'}  {c.name} ({c.checked} checked)")
    print(f"{'PASS' if outcome.passed else 'FAIL'}: {len(outcome.faults)} faults, {len(outcome.ops)} writes; {path}")
    if outcome.passed and not args.keep:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0 if outcome.passed else 1
