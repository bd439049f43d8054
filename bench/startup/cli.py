"""`raftkube bench startup`: pod start-up latency on hollow nodes, and `raftkube up` to Ready nodes.

    raftkube bench startup [--quick] [--skip-up] [--pods N --nodes M [--rate R]]

Cases: 3,000 pods created at 20 pods/s on 100 hollow nodes, and 1,000 pods at full speed on
1,000 hollow nodes (--quick: 300 pods at 20 pods/s on 100 nodes, 300 at full speed on 1,000).
Each case on a fresh store and apiserver with its own scheduler, controller-manager
(nodelifecycle, serviceaccount) and hollow-nodes processes (bench/startup/case.py).  Then
`raftkube up` on a fresh data dir, timed to Ready nodes (upcase.py).  Progress on stderr, the
table on stdout, JSON and a PNG under bench/results/; every process it started is killed by
pid at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

from bench.store.session import Session

FULL = ((3000, 100, 20.0), (1000, 1000, 0.0))
QUICK = ((300, 100, 20.0), (300, 1000, 0.0))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="300 pods per case instead of 3,000 and 1,000")
    p.add_argument("--skip-up", action="store_true", help="do not time `raftkube up`")
    p.add_argument("--pods", type=_count, help="one case with this many pods (with --nodes and --rate)")
    p.add_argument("--nodes", type=_count, help="hollow nodes of that one case")
    p.add_argument("--rate", type=float, default=20.0, help="pods/s of that one case (0: full speed)")
    p.add_argument(
        "--lease-window",
        type=_lease_window,
        default=30.0,
        help="seconds over which the nodes' Lease renewals are judged (default 30: three renewals; at least 11)",
    )
    p.add_argument("--json", type=Path, default=Path("bench/results/startup.json"), help="where to write the results")
    p.add_argument("--png", type=Path, default=Path("bench/results/startup.png"), help="where to write the plot")
    p.add_argument("--config", type=Path, default=Path("cluster.toml"), help="raftkube settings ([store])")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs) after the run")


MIN_LEASE_WINDOW_S = 11.0
"""A kubelet renews its Lease every 10 s: a shorter window may see no renewal of a node."""


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 < v <= 5000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 5000, got {v}")
    return v


def _lease_window(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not MIN_LEASE_WINDOW_S <= v <= 3600:
        raise argparse.ArgumentTypeError(f"must be from {MIN_LEASE_WINDOW_S:g} to 3600 seconds, got {text}")
    return v


def cases_of(args: argparse.Namespace) -> tuple[tuple[int, int, float], ...]:
    """(pods, nodes, pods/s) of every case, in the order they run."""
    if args.pods or args.nodes:
        if not (args.pods and args.nodes) or not 0 <= args.rate <= 1000:
            raise ValueError("--pods and --nodes go together, with --rate from 0 to 1000")
        return ((args.pods, args.nodes, args.rate),)
    return QUICK if args.quick else FULL


def _run_case(cases_mod: Any, case: Any, session: Session, config: Path) -> dict[str, Any]:
    return dict(cases_mod.run(case, session.root / case.key, config, session.progress))


def run(args: argparse.Namespace) -> int:
    try:
        from bench.startup import case as cases_mod
        from bench.startup import report, upcase
    except ImportError as e:
        print(f"raftkube bench startup: {e} (install the bench extra: pip install -e '.[bench]')", file=sys.stderr)
        return 1
    try:
        cases = cases_of(args)
    except ValueError as e:
        print(f"raftkube bench startup: {e}", file=sys.stderr)
        return 2
    machine = report.machine()
    with Session("startup", keep=args.keep) as session:
        for pods, nodes, rate in cases:
            case = cases_mod.Case(pods, nodes, rate, args.lease_window)
            session.case(case.key, functools.partial(_run_case, cases_mod, case, session, args.config))
        up = None
        if not args.skip_up:
            up = session.case("up", lambda: upcase.run(session.root, args.config, session.progress))
            session.results.pop("up", None)
    config = {"quick": args.quick, "cases": [list(c) for c in cases], "wall_s": session.wall_s}
    config["failed_cases"] = session.failed
    doc = report.document(config, machine, session.results, up, report.evaluate(session.results, up))
    return session.write(doc, args.json, args.png, report.render, report.plot)
