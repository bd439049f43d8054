"""The `raftkube` command: one parser whose subcommands each module of the store, the
apiserver, the components and this package registers (`register(sub)`); benchmarks are
loaded only when run (components.cli.bench).

Exit codes: 0 success, 1 a command ran and failed, 2 bad usage or bad configuration
(with a message that names what was wrong).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from importlib.metadata import PackageNotFoundError, version

from machinery.process.command import UsageError
from machinery.process.config import ConfigError
from machinery.process.launch import LauncherError
from store.cli.common import ClusterError
from store.cli.locate import LocateError

COMMANDS: dict[str, str] = {
    "bench": "components.cli.bench",
    "peers": "components.cli.peers",
    "conformance": "components.cli.conformance",
    "up": "components.cli.cluster",
    "down": "components.cli.cluster",
    "status": "components.cli.cluster",
    "logs": "components.cli.parts",
    "restart": "components.cli.parts",
    "stop": "components.cli.parts",
    "start": "components.cli.parts",
    "controller-manager": "components.controller_manager",
    "scheduler": "components.scheduler.main",
    "dns": "components.dns.main",
    "kubelet": "components.kubelet.main",
    "proxy": "components.proxy.main",
    "hollow-nodes": "components.kubelet.hollow",
    "apiserver-balancer": "components.balancer.main",
    "user": "components.cli.user",
    "store": "store.cli.cluster",
    "apiserver": "apiserver.main",
    "kv": "store.cli.kv.commands",
    "chaos": "components.cli.chaos",
}
"""Each command and the module that registers it (`register(sub)`), in the order of the help.
A run imports only its command's module: `raftkube kv get` does not load the apiserver (it
took 0.6 s of every command's 0.9 s); the help and unknown commands load them all.
tests/components/cli/test_main.py checks the table against what the modules register."""


def _version() -> str:
    try:
        return version("raftkube")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `command`, only that command's (the others are not even imported)."""
    p = argparse.ArgumentParser(prog="raftkube", description="The Kubernetes control plane, rebuilt in Python.")
    p.add_argument("--version", action="version", version=f"raftkube {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = [COMMANDS[command]] if command in COMMANDS else list(COMMANDS.values())
    for module in dict.fromkeys(wanted):
        importlib.import_module(module).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    command = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(words)
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
