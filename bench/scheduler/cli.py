"""`raftkube bench scheduler`: pods/s the scheduler binds, on Node objects without kubelets.

    raftkube bench scheduler [--quick] [--nodes N] [--pods M] [--profile]

Cases (pending pods, nodes): (1,000, 100), (1,000, 1,000), (10,000, 100), (10,000, 1,000);
--quick runs the two with 1,000 pods.  --nodes and --pods replace the node counts and the pod
counts (both: one case).  For each case, a fresh store (3 raftkube members, fsync on) and ONE
`raftkube apiserver` over it (as `raftkube bench apiserver` starts them); the driver creates
the Ready nodes and the pending pods through the apiserver while no scheduler runs, opens a
watch on the pods, then starts `python -m components.scheduler` as its own process and times
it from its "informers synced" log line until the watch has seen every pod bound (pods/s,
latency p50/p99 per pod, the scheduler's e2e histogram from its /metrics, its CPU and peak
memory).  Goal: >= 300 pods/s on 1,000 nodes.  --profile records the scheduler with py-spy
while it schedules and says where its time goes.

A progress line per case goes to stderr, the table to stdout; the JSON (machine, load average
at start and end, versions) and a PNG go to bench/results/.  Every process started is killed
by pid after each case and at the end, also on Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
from pathlib import Path

from bench.store.session import Session

# Only the standard library and bench.store.session (standard-library only) above:
# the `raftkube` command imports this module, and must work without the bench extra.
FULL_PODS = (1000, 10_000)
FULL_NODES = (100, 1000)
QUICK_PODS = (1000,)


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {v}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="only the cases with 1,000 pods (100 and 1,000 nodes)")
    p.add_argument("--nodes", type=_count, help="Node objects per case, instead of 100 and 1,000")
    p.add_argument("--pods", type=_count, help="pending pods per case, instead of 1,000 and 10,000")
    p.add_argument("--profile", action="store_true", help="record the scheduler with py-spy while it schedules")
    p.add_argument("--json", type=Path, default=Path("bench/results/scheduler.json"), help="where to write the results")
    p.add_argument("--png", type=Path, default=Path("bench/results/scheduler.png"), help="where to write the plot")
    p.add_argument("--config", type=Path, default=Path("cluster.toml"), help="raftkube settings ([store])")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs) after the run")


def cases_of(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(pods, nodes) of every case, in the order they run (small first)."""
    pods = (args.pods,) if args.pods else (QUICK_PODS if args.quick else FULL_PODS)
    nodes = (args.nodes,) if args.nodes else FULL_NODES
    return [(p, n) for p in pods for n in nodes]


def run(args: argparse.Namespace) -> int:
    try:
        from bench.scheduler import case as cases_mod
        from bench.scheduler import plot, report, targets
    except ImportError as e:
        print(f"raftkube bench scheduler: {e} (install the bench extra: pip install -e '.[bench]')", file=sys.stderr)
        return 1
    if args.profile and shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        print("raftkube bench scheduler: --profile needs py-spy (pip install py-spy)", file=sys.stderr)
        return 1
    machine = report.machine()
    with Session("scheduler", keep=args.keep) as session:
        profile_dir = args.json.parent / "profiles" if args.profile else None
        env = cases_mod.Env(session.root, args.config, session.progress, profile_dir)
        for pods, nodes in cases_of(args):
            case = cases_mod.Case(pods, nodes)
            session.case(case.key, functools.partial(cases_mod.run, case, env))
    config = {
        "quick": args.quick,
        "cases": [list(c) for c in cases_of(args)],
        "store": {"members": 3, "fsync": True, "tls": False, "fresh_per_case": True},
        "scheduler": "python -m components.scheduler --no-leader-elect (one process)",
        "window": "the scheduler's 'informers synced' log line -> the driver's watch sees the last pod bound",
        "profile": args.profile,
        "wall_s": session.wall_s,
        "failed_cases": session.failed,
    }
    doc = report.document(config, machine, session.results, targets.evaluate(session.results))
    return session.write(doc, args.json, args.png, report.render, plot.plot)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
