"""`raftkube dns`: the cluster DNS server (what CoreDNS with its kubernetes plugin is in a
kubeadm cluster) as its own process.

It watches Services, EndpointSlices and Namespaces, answers the cluster domain from them
(`records.Zone`), and forwards every other name to the resolvers of the host's /etc/resolv.conf
(or `--upstream`), never to itself.  With `--advertise IP:PORT` it also keeps the
`kube-system/kube-dns` Service and its own EndpointSlice (`registration`).  It starts answering
once the informers have synced (so it never says NXDOMAIN for a name it has not read yet), and
/healthz says ok from then on.

Exit codes (`components.runner`): 0 after SIGTERM/SIGINT, 1 when it fails (the port is taken),
2 for bad flags or an unusable kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from components.client import kubeconfig
from components.client.informer import EventHandler, InformerFactory
from components.client.kubeconfig import KubeconfigError
from components.client.listwatch import Resource
from components.client.rest import RestClient
from components.dns import registration
from components.dns.records import DEFAULT_DOMAIN, DEFAULT_TTL, Zone, is_dns_name
from components.dns.server import DNSServer, Forwarder, Handler, Metrics, Upstream
from components.health import HealthServer, add_health_flags, check_health_flags
from components.runner import run_component
from machinery.ip_port import ip_port as host_port
from machinery.objects import Obj

log = logging.getLogger("raftkube.dns")
RESOLV_CONF = "/etc/resolv.conf"
SERVICES = Resource("", "v1", "services", kind="Service")
SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", kind="EndpointSlice")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False, kind="Namespace")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", required=True, help="the kubeconfig with the apiserver and this process's identity")
    p.add_argument("--listen", default="0.0.0.0:53", help="HOST:PORT to answer on, UDP and TCP (default 0.0.0.0:53)")
    p.add_argument(
        "--advertise",
        default="",
        help="IP:PORT pods reach this server at, kept in kube-system/kube-dns's EndpointSlice (default: none kept)",
    )
    p.add_argument("--cluster-domain", default=DEFAULT_DOMAIN, help=f"the zone answered (default {DEFAULT_DOMAIN})")
    p.add_argument(
        "--service-ip",
        default=registration.DEFAULT_SERVICE_IP,
        help=f"kube-dns's ClusterIP, on create (default {registration.DEFAULT_SERVICE_IP})",
    )
    p.add_argument(
        "--upstream",
        action="append",
        default=[],
        help="IP[:PORT] to forward other names to (repeatable; default: the nameservers of /etc/resolv.conf)",
    )
    p.add_argument(
        "--ttl", type=int, default=DEFAULT_TTL, help=f"seconds answers may be cached (default {DEFAULT_TTL})"
    )
    add_health_flags(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log at debug level")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dns", help="run the cluster DNS server (CoreDNS's kubernetes plugin semantics)")
    add_arguments(p)
    p.set_defaults(run=run)


@dataclass(frozen=True)
class Options:
    kubeconfig: str
    listen: Upstream
    advertise: Upstream | None
    domain: str
    service_ip: str
    upstreams: list[Upstream]
    ttl: int
    health_port: int
    health_address: str


def options(args: argparse.Namespace) -> Options:
    """Checked options; ValueError names the flag."""
    listen = host_port(args.listen, "--listen")
    advertise = host_port(args.advertise, "--advertise") if args.advertise else None
    if advertise is not None and ipaddress.ip_address(advertise[0]).is_unspecified:
        raise ValueError(f"--advertise {args.advertise}: pods need an address to reach, not a wildcard")
    if not is_dns_name(args.cluster_domain):
        raise ValueError(f"--cluster-domain {args.cluster_domain}: not a DNS name")
    try:
        ipaddress.ip_address(args.service_ip)
    except ValueError:
        raise ValueError(f"--service-ip {args.service_ip}: not an IP address") from None
    if not 0 <= args.ttl <= 3600:
        raise ValueError(f"--ttl {args.ttl}: from 0 to 3600 seconds")
    check_health_flags(args)
    given = [host_port(u, "--upstream", 53) for u in args.upstream]
    upstreams = upstreams_of(given or read_resolv_conf(RESOLV_CONF), listen, advertise, args.service_ip)
    if given and not upstreams:
        raise ValueError("--upstream: every one given is this server itself")
    return Options(
        args.kubeconfig,
        listen,
        advertise,
        args.cluster_domain,
        args.service_ip,
        upstreams,
        args.ttl,
        args.health_port,
        args.health_address,
    )


def read_resolv_conf(path: str) -> list[Upstream]:
    """The nameservers of a resolv.conf, port 53 (an unreadable file: none)."""
    out: list[Upstream] = []
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            addr = fields[1].split("%")[0]  # a zone index (fe80::1%eth0) is not ours to keep
            with contextlib.suppress(ValueError):
                out.append((str(ipaddress.ip_address(addr)), 53))
    return out


def upstreams_of(
    candidates: list[Upstream], listen: Upstream, advertise: Upstream | None, service_ip: str
) -> list[Upstream]:
    """The candidates but this server itself: its listening address (any loopback or local
    address, when it listens on all), its advertised one and kube-dns's ClusterIP, which all
    lead back here (a forwarding loop)."""
    host, port = listen
    wildcard = ipaddress.ip_address(host).is_unspecified
    out = []
    for ip, p in candidates:
        addr = ipaddress.ip_address(ip)
        if p == port and (ip == host or (wildcard and (addr.is_loopback or addr.is_unspecified))):
            continue
        if (ip, p) == advertise or (ip == service_ip and p == 53):
            continue
        out.append((ip, p))
    return out[:3]  # glibc's MAXNS


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        opts = options(args)
        config = kubeconfig.load(opts.kubeconfig)
    except (ValueError, KubeconfigError, OSError) as e:
        print(f"raftkube dns: {e}", file=sys.stderr)
        return 2
    if not opts.upstreams:
        log.warning("no upstream resolver (none in %s that is not this server): other names get SERVFAIL", RESOLV_CONF)
    return asyncio.run(serve(opts, config))


def _feed(set_: Callable[[Obj], None], delete: Callable[[Obj], None]) -> EventHandler:
    return EventHandler(on_add=set_, on_update=lambda _old, new: set_(new), on_delete=delete)


async def serve(opts: Options, config: kubeconfig.ClientConfig) -> int:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    zone = Zone(opts.domain, opts.ttl, dns_ip=opts.service_ip)
    server = DNSServer(Handler(zone, Forwarder(opts.upstreams), metrics), metrics)
    async with RestClient(config, user_agent="raftkube-dns") as client:
        factory = InformerFactory(client)
        factory.informer(SERVICES).add_handler(_feed(zone.set_service, zone.delete_service))
        factory.informer(SLICES).add_handler(_feed(zone.set_slice, zone.delete_slice))
        factory.informer(NAMESPACES).add_handler(_feed(zone.set_namespace, zone.delete_namespace))

        def healthy() -> str | None:
            if not all(i.has_synced() for i in factory.informers()):
                return "informers not synced"
            return None if server.bound else "not listening yet"

        async def work() -> None:
            factory.start()
            keeping: asyncio.Task[None] | None = None
            try:
                while not await factory.wait_for_sync(timeout=30):
                    log.warning("informers not synced after 30 s; still waiting before answering")
                await server.start(*opts.listen)
                log.info("answering %s on %s:%d (upstreams %s)", opts.domain, *opts.listen, opts.upstreams or "none")
                if opts.advertise is not None:
                    target = registration.KubeDNS(opts.service_ip, *opts.advertise, metrics_port=opts.health_port)
                    keeping = asyncio.create_task(registration.keep_forever(client, target))
                await asyncio.Event().wait()
            finally:
                if keeping is not None:
                    keeping.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await keeping
                await server.stop()
                await factory.stop()

        health = HealthServer(opts.health_port, registry, healthy, host=opts.health_address)
        return await run_component("the DNS server", work, log, health)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftkube dns")
    add_arguments(parser)
    return run(parser.parse_args(argv))
