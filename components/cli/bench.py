"""`raftkube bench BENCHMARK`: the benchmark commands, loaded only when one is run.

The benchmarks (bench/) import their peers' clients (grpcio for etcd, pysyncobj), plotting
and load generators; none of that belongs in the start-up of `raftkube up` or of a kubelet,
and the bench extra may not even be installed.  So each benchmark's subcommand is declared
here by name and help line only, and its module (which declares `add_arguments(parser)` and
`run(args)`) is imported when that subcommand is parsed: `raftkube bench store --quick`
imports bench.store.cli, `raftkube bench --help` and every other command import no bench
module.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

BENCHMARKS: tuple[tuple[str, str, str], ...] = (
    ("raft-core", "bench.raft_core", "CPU cost per committed entry of the pure Raft core (3 nodes, one process)"),
    (
        "store",
        "bench.store.cli",
        "the store side by side with etcd and pysyncobj: writes, reads, watch, failover, restart",
    ),
    (
        "apiserver",
        "bench.apiserver.cli",
        "the apiserver over raftkube and over etcd: watch fan-out, watch events/s, LIST, creates",
    ),
    (
        "scheduler",
        "bench.scheduler.cli",
        "pods/s the scheduler binds on 100 and 1,000 Node objects (no kubelets), CPU and memory",
    ),
    (
        "startup",
        "bench.startup.cli",
        "pod start-up latency on 100 and 1,000 hollow nodes, and raftkube up to Ready nodes",
    ),
    (
        "network",
        "bench.network.cli",
        "Service traffic through the proxy against pod-to-pod direct; EndpointSlice change to live rule",
    ),
)
"""Each benchmark: its subcommand, the module that declares its arguments and runs it, its help."""


class LazyBenchParser(argparse.ArgumentParser):
    """A benchmark's subcommand parser that imports its module the first time it parses."""

    def __init__(self, *args: Any, module: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.module = module
        self._loaded = False

    def load(self) -> None:
        """Import the benchmark's module and let it declare its arguments and runner."""
        if self._loaded:
            return
        self._loaded = True
        bench = importlib.import_module(self.module)
        bench.add_arguments(self)
        self.set_defaults(run=bench.run)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.load()
        return super().parse_known_args(args, namespace)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser("bench", help="run a benchmark and print its figures")
    bench_sub = bench.add_subparsers(dest="bench", metavar="BENCHMARK", required=True, parser_class=LazyBenchParser)
    for name, module, helptext in BENCHMARKS:
        bench_sub.add_parser(name, help=helptext, module=module)
