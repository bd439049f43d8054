"""`raftkube scheduler`: flags, the leader election around the scheduler, /healthz and /metrics
(the scheduler's metrics registry).

Exit codes (`components.runner`): 0 after SIGTERM/SIGINT (the Lease is released first), 1 when
leadership is lost or the scheduler fails (as kube-scheduler, which exits so that a supervisor
restarts it), 2 for bad flags or an unusable kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from components.client import kubeconfig
from components.client.kubeconfig import KubeconfigError
from components.client.leaderelection import LeaderElector, default_identity
from components.client.rest import RestClient
from components.health import add_health_flags, check_health_flags, health_server
from components.runner import LeaderElection, run_component
from components.scheduler.metrics import Metrics
from components.scheduler.scheduler import Scheduler
from machinery import canary

log = logging.getLogger("raftkube.scheduler")
LEASE_NAME = "kube-scheduler"
LEASE_NAMESPACE = "kube-system"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", required=True, help="the scheduler's own kubeconfig")
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="hold the kube-system/kube-scheduler Lease while scheduling (default: on)",
    )
    # kube-scheduler's flag names, and the short ones
    lease = ("--leader-elect-lease-duration", "--lease-duration")
    parser.add_argument(*lease, dest="lease_duration", type=float, default=15.0, help="seconds (default 15)")
    renew = ("--leader-elect-renew-deadline", "--renew-deadline")
    parser.add_argument(*renew, dest="renew_deadline", type=float, default=10.0, help="seconds (default 10)")
    retry = ("--leader-elect-retry-period", "--retry-period")
    parser.add_argument(*retry, dest="retry_period", type=float, default=2.0, help="seconds (default 2)")
    add_health_flags(parser)
    parser.add_argument("--identity", default="", help="leader election identity (default: hostname_<uuid>)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")


def register(subparsers: Any) -> None:
    """Add the `scheduler` subcommand to `raftkube`'s subparsers."""
    parser = subparsers.add_parser("scheduler", help="run the scheduler (kube-scheduler semantics)")
    add_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = kubeconfig.load(args.kubeconfig)
    except (KubeconfigError, OSError) as e:
        print(f"raftkube scheduler: {e}", file=sys.stderr)
        return 2
    identity = args.identity or default_identity()
    try:
        check(args, identity)
    except ValueError as e:
        print(f"raftkube scheduler: {e}", file=sys.stderr)
        return 2
    return asyncio.run(_main(args, config, identity))


def check(args: argparse.Namespace, identity: str = "check") -> None:
    """ValueError naming the flag whose value the scheduler cannot run with (`up` checks the
    flags cluster.toml gives it this way before it starts one)."""
    check_health_flags(args)
    if args.leader_elect:
        LeaderElector(
            _NoClient(),
            LEASE_NAME,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
            identity=identity,
        )


class _NoClient:
    """Lets the elector validate the flags before any connection is made."""

    async def get(self, path: str) -> dict[str, Any]:
        raise NotImplementedError

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


async def _main(args: argparse.Namespace, config: kubeconfig.ClientConfig, identity: str) -> int:
    metrics = Metrics()
    health = health_server(args, metrics.registry, lambda: None)
    client = RestClient(config, user_agent="raftkube-scheduler")
    try:
        scheduler = Scheduler(client, identity=identity, metrics=metrics)
        election = None
        if canary.mode() == canary.SCHEDULER_IGNORES_LEASE:
            log.warning("CANARY %s: scheduling without the Lease (a chaos run must catch this)", canary.mode())
        elif args.leader_elect:
            election = LeaderElection(
                client,
                LEASE_NAME,
                identity=identity,
                namespace=LEASE_NAMESPACE,
                lease_duration=args.lease_duration,
                renew_deadline=args.renew_deadline,
                retry_period=args.retry_period,
                on_new_leader=lambda who: log.info("the leader is now %s", who),
            )
        return await run_component("the scheduler", scheduler.run, log, health, election)
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftkube scheduler")
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args)
