"""The `raftkube` command: one parser whose subcommands each module of the store, the
apiserver, the components and this package registers (`register(sub)`); benchmarks are
loaded only when run (components.cli.bench).

Exit codes: 0 success, 1 a command ran and failed, 2 bad usage or bad configuration
(with a message that names what was wrong).
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

from apiserver import main as apiserver_cli
from components import controller_manager
from components.cli import bench, cluster, conformance, parts, peers, user
from components.dns import main as dns_main
from components.kubelet import hollow
from components.kubelet import main as kubelet_main
from components.proxy import main as proxy_main
from components.scheduler import main as scheduler_main
from machinery.process.command import UsageError
from machinery.process.config import ConfigError
from machinery.process.launch import LauncherError
from store.chaos import cli as chaos_cli
from store.cli import cluster as store_cli
from store.cli.common import ClusterError
from store.cli.kv import commands as kv_cli
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
    bench.register(sub)
    peers.register(sub)
    conformance.register(sub)
    cluster.register(sub)
    parts.register(sub)
    controller_manager.register(sub)
    scheduler_main.register(sub)
    dns_main.register(sub)
    kubelet_main.register(sub)
    proxy_main.register(sub)
    hollow.register(sub)
    user.register(sub)
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
