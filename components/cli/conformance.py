"""`raftkube conformance`: the upstream conformance suite (the built e2e.test) against a fresh
`raftkube up` or a given cluster, with a per-SIG summary; `raftkube conformance report`
rebuilds the summary from JUnit files.

The flags are declared here (argparse only), the work is in bench.conformance, imported when
a conformance command runs, as the benchmarks and peers are (components.cli.bench).
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

DEFAULT_REPORT = Path("bench/results")


def _run(args: argparse.Namespace) -> int:
    return int(importlib.import_module("bench.conformance.cli").run_command(args))


def _report(args: argparse.Namespace) -> int:
    return int(importlib.import_module("bench.conformance.cli").report_command(args))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "conformance",
        help="run the upstream conformance suite (e2e.test) against a fresh cluster; per-SIG summary",
        description=(
            "Run the built e2e.test (`raftkube peers build --only e2e.test,ginkgo`) against a fresh "
            "`raftkube up` in a temporary data dir, or against --kubeconfig's cluster; show a line per "
            "finished spec; write JUnit, conformance.json and conformance.md into --report."
        ),
    )
    p.add_argument("--focus", default=r"\[Conformance\]", metavar="RE", help=r"specs to run (default: \[Conformance\])")
    p.add_argument("--skip", metavar="RE", help="specs to leave out")
    p.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="N",
        help=r"e2e.test processes (ginkgo); the \[Serial\] specs then run in a second, single-process pass",
    )
    p.add_argument("--kubeconfig", type=Path, help="test this cluster instead of a fresh one")
    p.add_argument("--report", type=Path, default=DEFAULT_REPORT, metavar="DIR", help="where the reports go")
    p.add_argument("--timeout", default="2h", metavar="DUR", help="bound on the whole run, a Go duration (default 2h)")
    p.add_argument(
        "--content-type",
        default="application/json",
        help="what e2e.test's clients send and accept (application/json or application/vnd.kubernetes.protobuf)",
    )
    p.add_argument("--kubectl", type=Path, help="the kubectl e2e's kubectl tests run (default: kubectl.1.33)")
    p.add_argument(
        "--config", type=Path, default=Path("cluster.toml"), help="the fresh cluster's cluster.toml (as `raftkube up`)"
    )
    p.add_argument(
        "--pod-network",
        choices=("host", "netns"),
        help="the fresh cluster's pod network (as `raftkube up --pod-network`); default netns when root, else host:"
        " pods of a Deployment that listen on one port need their own IPs",
    )
    p.set_defaults(run=_run)
    sub_p = p.add_subparsers(dest="conformance", metavar="COMMAND")
    rep = sub_p.add_parser("report", help="rebuild conformance.json and conformance.md from JUnit files")
    rep.add_argument("paths", nargs="+", type=Path, metavar="JUNIT", help="junit*.xml files, or folders holding them")
    # its own dest: a subcommand's defaults overwrite the parent's, so `conformance --report D report F` must still work
    rep.add_argument(
        "--report", dest="report_into", type=Path, metavar="DIR", help="where the reports go (default bench/results)"
    )
    rep.set_defaults(run=_report)
