"""`raftkube apiserver-balancer`: the TCP balancer in front of an HA control plane's apiservers
(components.balancer.core), as its own process.

Its kubeconfig says where the apiservers are (the cluster's `raftkube.io/apiservers`
extension, else its `server`), which CA their certificates come from, and who it is: the
probes of /readyz go as that user (`raftkube:apiserver-balancer` from `up`, authenticated and
nothing more: RBAC's public-info-viewer lets it read /readyz; our apiserver refuses anonymous
requests by default).  The clients' connections it passes through untouched.

Exit codes (`components.runner`): 0 after SIGTERM/SIGINT, 1 when it fails (the port is taken),
2 for bad flags or an unusable kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
import sys
from dataclasses import dataclass
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry

from components.balancer.core import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_PROBE_INTERVAL_S,
    Backend,
    Balancer,
    readyz_probe,
)
from components.client import kubeconfig
from components.client.kubeconfig import ClientConfig, KubeconfigError
from components.health import HealthServer
from components.runner import run_component
from machinery.ip_port import ip_port

log = logging.getLogger("raftkube.balancer")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", required=True, help="where the apiservers are and the CA that signs them")
    p.add_argument("--listen", required=True, help="IP:PORT to accept clients on (the cluster's API address)")
    p.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        help=f"client connections at once; more are closed (default {DEFAULT_MAX_CONNECTIONS})",
    )
    p.add_argument(
        "--probe-interval",
        type=float,
        default=DEFAULT_PROBE_INTERVAL_S,
        help=f"seconds between /readyz probes of each apiserver (default {DEFAULT_PROBE_INTERVAL_S})",
    )
    p.add_argument("--health-port", type=int, default=0, help="/healthz and /metrics on 127.0.0.1 (0: off)")
    p.add_argument("-v", "--verbose", action="store_true", help="log at debug level")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("apiserver-balancer", help="run the TCP balancer in front of several apiservers")
    add_arguments(p)
    p.set_defaults(run=run)


@dataclass(frozen=True)
class Options:
    listen: tuple[str, int]
    backends: list[Backend]
    config: ClientConfig
    max_connections: int
    probe_interval: float
    health_port: int


def options(args: argparse.Namespace) -> Options:
    """Checked options; ValueError (or KubeconfigError) names the flag or the field."""
    listen = ip_port(args.listen, "--listen")
    if not 1 <= args.max_connections <= 1_000_000:
        raise ValueError(f"--max-connections {args.max_connections}: from 1 to 1000000")
    if not 0.05 <= args.probe_interval <= 60:
        raise ValueError(f"--probe-interval {args.probe_interval}: from 0.05 to 60 seconds")
    if not 0 <= args.health_port < 65536:
        raise ValueError(f"--health-port {args.health_port}: not a port")
    config = kubeconfig.load(args.kubeconfig)
    backends = []
    for url in config.endpoints:
        parts = urlsplit(url)
        if parts.scheme != "https" or parts.hostname is None:
            raise ValueError(f"{args.kubeconfig}: apiserver {url}: the balancer passes TLS through; https only")
        backends.append(Backend(parts.hostname, parts.port or 443))
    if any((b.host, b.port) == listen for b in backends):
        raise ValueError(f"--listen {args.listen}: is one of the apiservers it balances (a loop)")
    return Options(listen, backends, config, args.max_connections, args.probe_interval, args.health_port)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        opts = options(args)
        tls = opts.config.ssl_context()
    except (ValueError, KubeconfigError, OSError) as e:
        print(f"raftkube apiserver-balancer: {e}", file=sys.stderr)
        return 2
    return asyncio.run(serve(opts, tls))


async def serve(opts: Options, tls: ssl.SSLContext) -> int:
    registry = CollectorRegistry()
    balancer = Balancer(
        opts.backends,
        readyz_probe(tls, server_name=opts.config.tls_server_name),
        registry,
        max_connections=opts.max_connections,
        connect_timeout=DEFAULT_CONNECT_TIMEOUT_S,
        probe_interval=opts.probe_interval,
    )

    async def work() -> None:
        await balancer.start(*opts.listen)
        host, port = opts.listen
        log.info("balancing %s:%d over %s", host, port, ", ".join(b.name for b in opts.backends))
        try:
            await balancer.probe_forever()
        finally:
            await balancer.stop()

    health = HealthServer(opts.health_port, registry, balancer.healthy)
    return await run_component("the apiserver balancer", work, log, health)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftkube apiserver-balancer")
    add_arguments(parser)
    return run(parser.parse_args(argv))
