"""A component's /healthz and /metrics, on a loopback port of its own (0: none).

/healthz answers 200 "ok" while `healthy()` holds, else 500 with the reason; /metrics is the
Prometheus text of the component's registry.  Plain aiohttp: no TLS, bound to 127.0.0.1 by
default, since it carries no secrets and is for the local launcher and a local scraper.  A
component on a host of its own (`raftkube up --hosts netns`) binds its host's address instead
(`--health-address`), the one the launcher on the machine can reach."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Check = Callable[[], str | None]  # None: healthy; else why not
LOOPBACK = "127.0.0.1"


def add_health_flags(p: argparse.ArgumentParser) -> None:
    """`--health-port` and `--health-address`, the same for every component that takes them."""
    p.add_argument("--health-port", type=int, default=0, help="/healthz and /metrics on this port (0: off)")
    p.add_argument(
        "--health-address",
        default=LOOPBACK,
        help=f"the address /healthz and /metrics listen on (default {LOOPBACK}; a host's own on a host of its own)",
    )


def check_health_flags(args: argparse.Namespace) -> None:
    """ValueError naming the health flag a component cannot serve with."""
    if not 0 <= args.health_port < 65536:
        raise ValueError(f"--health-port must be from 0 to 65535, got {args.health_port}")
    try:
        ipaddress.ip_address(args.health_address)
    except ValueError:
        raise ValueError(f"--health-address must be an IP address, got {args.health_address!r}") from None


def health_server(args: argparse.Namespace, registry: CollectorRegistry, check: Check) -> HealthServer:
    """The HealthServer of checked health flags."""
    return HealthServer(args.health_port, registry, check, host=args.health_address)


class HealthServer:
    def __init__(self, port: int, registry: CollectorRegistry, check: Check, host: str = "127.0.0.1") -> None:
        self.port, self.host = port, host
        self.registry, self.check = registry, check
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        if not self.port:
            return
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, _request: web.Request) -> web.Response:
        problem = self.check()
        if problem is None:
            return web.Response(text="ok")
        return web.Response(status=500, text=problem)

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
