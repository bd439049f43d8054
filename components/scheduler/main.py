"""`raftkube scheduler`: flags, the leader election around the scheduler, /healthz and /metrics.

Exit codes: 0 after SIGTERM/SIGINT (the Lease is released first), 1 when leadership is lost
(as kube-scheduler, which exits so that a supervisor restarts it), 2 for bad flags or an
unusable kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from components.client import kubeconfig
from components.client.kubeconfig import KubeconfigError
from components.client.leaderelection import LeaderElector, default_identity
from components.client.rest import RestClient
from components.scheduler.metrics import Metrics
from components.scheduler.scheduler import Scheduler

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
    parser.add_argument("--health-port", type=int, default=0, help="/healthz and /metrics on 127.0.0.1 (0 = off)")
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
    if not 0 <= args.health_port <= 65535:
        print(f"raftkube scheduler: --health-port {args.health_port}: not a port", file=sys.stderr)
        return 2
    identity = args.identity or default_identity()
    if args.leader_elect:
        try:
            LeaderElector(
                _NoClient(),
                LEASE_NAME,
                lease_duration=args.lease_duration,
                renew_deadline=args.renew_deadline,
                retry_period=args.retry_period,
                identity=identity,
            )
        except ValueError as e:
            print(f"raftkube scheduler: {e}", file=sys.stderr)
            return 2
    return asyncio.run(_main(args, config, identity))


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
    client = RestClient(config, user_agent="raftkube-scheduler")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = await _serve_health(args.health_port, metrics) if args.health_port else None
    code = 0
    try:
        scheduler = Scheduler(client, identity=identity, metrics=metrics)
        if args.leader_elect:
            elector = LeaderElector(
                client,
                LEASE_NAME,
                namespace=LEASE_NAMESPACE,
                identity=identity,
                lease_duration=args.lease_duration,
                renew_deadline=args.renew_deadline,
                retry_period=args.retry_period,
                on_started_leading=scheduler.run,
                on_new_leader=lambda who: log.info("the leader is now %s", who),
            )
            work: asyncio.Task[None] = asyncio.create_task(elector.run())
        else:
            work = asyncio.create_task(scheduler.run())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            stopper.cancel()
            exc = work.exception()
            if exc is not None:
                log.error("the scheduler failed: %r", exc)
            else:
                log.error("leadership lost")
            code = 1
        else:
            log.info("stopping")
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
    finally:
        if runner is not None:
            await runner.cleanup()
        await client.close()
    return code


async def _serve_health(port: int, metrics: Metrics) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def metrics_page(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftkube scheduler")
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args)
