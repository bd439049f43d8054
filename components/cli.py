"""The `raftkube` command.

Exit codes: 0 success, 1 a command ran and failed, 2 bad usage or bad configuration
(with a message that names what was wrong).
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

from apiserver import main as apiserver_cli
from bench import raft_core
from bench.apiserver import cli as apiserver_bench
from bench.scheduler import cli as scheduler_bench
from bench.startup import cli as startup_bench
from bench.store import cli as store_bench
from components import cluster_cli, controller_manager, parts_cli, user_cli
from components.kubelet import hollow
from components.kubelet import main as kubelet_main
from components.scheduler import main as scheduler_main
from machinery.process.command import UsageError
from machinery.process.config import ConfigError
from machinery.process.launch import LauncherError
from store.chaos import cli as chaos_cli
from store.cli import cluster as store_cli
from store.cli import kv as kv_cli
from store.cli.common import ClusterError
from store.cli.locate import LocateError


def _version() -> str:
    try:
        return version("raftkube")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="raftkube", description="The Kubernetes control plane, rebuilt in Python.")
    p.add_argument("--version", action="version", version=f"raftkube {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    bench = sub.add_parser("bench", help="run a benchmark and print its figures")
    bench_sub = bench.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
    core = bench_sub.add_parser(
        "raft-core", help="CPU cost per committed entry of the pure Raft core (3 nodes, one process)"
    )
    raft_core.add_arguments(core)
    core.set_defaults(run=raft_core.run)
    store = bench_sub.add_parser(
        "store", help="the store side by side with etcd and pysyncobj: writes, reads, watch, failover, restart"
    )
    store_bench.add_arguments(store)
    store.set_defaults(run=store_bench.run)
    api = bench_sub.add_parser(
        "apiserver", help="the apiserver over raftkube and over etcd: watch fan-out, watch events/s, LIST, creates"
    )
    apiserver_bench.add_arguments(api)
    api.set_defaults(run=apiserver_bench.run)
    sched = bench_sub.add_parser(
        "scheduler", help="pods/s the scheduler binds on 100 and 1,000 Node objects (no kubelets), CPU and memory"
    )
    scheduler_bench.add_arguments(sched)
    sched.set_defaults(run=scheduler_bench.run)
    startup = bench_sub.add_parser(
        "startup", help="pod start-up latency on 100 and 1,000 hollow nodes, and raftkube up to Ready nodes"
    )
    startup_bench.add_arguments(startup)
    startup.set_defaults(run=startup_bench.run)
    cluster_cli.register(sub)
    parts_cli.register(sub)
    controller_manager.register(sub)
    scheduler_main.register(sub)
    kubelet_main.register(sub)
    hollow.register(sub)
    user_cli.register(sub)
    store_cli.register(sub)
    apiserver_cli.register(sub)
    kv_cli.register(sub)
    chaos_cli.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except ConfigError as e:
        print(f"raftkube: configuration error: {e}", file=sys.stderr)
        return 2
    except (UsageError, LauncherError, LocateError) as e:
        print(f"raftkube: {e}", file=sys.stderr)
        return 2
    except ClusterError as e:
        print(f"raftkube: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
