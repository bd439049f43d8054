"""`raftkube proxy`: the service proxy of one node (kube-proxy, nftables mode).

It watches Services and EndpointSlices in every namespace and keeps the node's table
(`rk-proxy-<hash of the node name>`) in the network namespace it runs in; SIGTERM or SIGINT
removes the table and exits 0.  At start it sets the two sysctls the rules rely on, as a
kube node has them: net.bridge.bridge-nf-call-iptables = 1 (replies between pods of one
bridge pass conntrack; see rules.py) and net.ipv4.ip_forward = 1 (a pod's connection DNATed to
another pod is forwarded); `--no-sysctls` leaves them as they are.  `--netns NAME` programs
(and sets the sysctls of) another namespace instead, through `ip netns exec`.

Exit codes (`components.runner`): 0 after a signal, 1 when the sync loop fails, 2 for bad
flags (the message names the flag) or an unusable kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from components.client import kubeconfig
from components.client.informer import InformerFactory
from components.client.kubeconfig import KubeconfigError
from components.client.listwatch import Resource
from components.client.rest import RestClient
from components.health import add_health_flags, check_health_flags, health_server
from components.proxy import nft, rules
from components.proxy.proxier import Metrics, Proxier
from components.runner import run_component

log = logging.getLogger("raftkube.proxy")
SERVICES = Resource("", "v1", "services", kind="Service")
SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", kind="EndpointSlice")
NETNS_DIR = Path("/run/netns")
NETNS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
SYSCTLS = {
    "net/bridge/bridge-nf-call-iptables": "1",
    "net/ipv4/ip_forward": "1",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", required=True, help="the proxy's own kubeconfig")
    parser.add_argument("--node-name", required=True, help="the node this proxy serves")
    parser.add_argument(
        "--node-ip", action="append", default=[], required=True, help="an IPv4 address of the node (repeatable)"
    )
    parser.add_argument("--cluster-cidr", required=True, help="the pods' IPv4 CIDR, e.g. 10.244.0.0/16")
    parser.add_argument("--pod-cidr", default="", help="this node's pods' IPv4 CIDR (for internalTrafficPolicy Local)")
    add_health_flags(parser)
    parser.add_argument("--sync-period", type=float, default=30.0, help="seconds between full resyncs (default 30)")
    parser.add_argument(
        "--min-sync-period", type=float, default=0.1, help="seconds at least between syncs (default 0.1)"
    )
    parser.add_argument("--no-sysctls", action="store_true", help="leave ip_forward and bridge-nf-call-iptables")
    parser.add_argument(
        "--netns",
        default="",
        help="program the named network namespace (/run/netns/NAME) instead of the proxy's own",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")


def register(subparsers: Any) -> None:
    """Add the `proxy` subcommand to `raftkube`'s subparsers."""
    parser = subparsers.add_parser("proxy", help="run a node's service proxy (kube-proxy, nftables mode)")
    add_arguments(parser)
    parser.set_defaults(run=run)


def node_of(args: argparse.Namespace) -> rules.Node:
    """The node from the flags; ValueError naming the flag that is wrong."""
    if not args.node_name or not isinstance(args.node_name, str):
        raise ValueError("--node-name: empty")
    ips = []
    for text in args.node_ip:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            raise ValueError(f"--node-ip {text!r}: not an IP address") from None
        if not isinstance(ip, ipaddress.IPv4Address):
            raise ValueError(f"--node-ip {text}: not IPv4 (the proxy programs IPv4 only)")
        ips.append(ip)
    pod_cidr = _ipv4_network("--pod-cidr", args.pod_cidr) if args.pod_cidr else None
    return rules.Node(args.node_name, tuple(ips), _ipv4_network("--cluster-cidr", args.cluster_cidr), pod_cidr)


def _ipv4_network(flag: str, text: str) -> ipaddress.IPv4Network:
    try:
        net = ipaddress.ip_network(text)
    except ValueError as e:
        raise ValueError(f"{flag} {text!r}: {e}") from None
    if not isinstance(net, ipaddress.IPv4Network):
        raise ValueError(f"{flag} {text}: not IPv4")
    return net


def check(args: argparse.Namespace) -> rules.Node:
    """The node, or ValueError naming the flag the proxy cannot run with."""
    check_health_flags(args)
    if not args.sync_period > 0:
        raise ValueError(f"--sync-period {args.sync_period}: not positive")
    if not 0 <= args.min_sync_period <= args.sync_period:
        raise ValueError(f"--min-sync-period {args.min_sync_period}: not between 0 and --sync-period")
    if args.netns and (not NETNS_NAME.fullmatch(args.netns) or not (NETNS_DIR / args.netns).exists()):
        raise ValueError(f"--netns {args.netns!r}: no such network namespace under {NETNS_DIR}")
    return node_of(args)


def prefix_of(args: argparse.Namespace) -> tuple[str, ...]:
    """What runs nft (and sysctl) in the namespace the proxy programs."""
    return ("ip", "netns", "exec", args.netns) if args.netns else ()


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        node = check(args)
    except ValueError as e:
        print(f"raftkube proxy: {e}", file=sys.stderr)
        return 2
    try:
        config = kubeconfig.load(args.kubeconfig)
    except (KubeconfigError, OSError) as e:
        print(f"raftkube proxy: --kubeconfig: {e}", file=sys.stderr)
        return 2
    if not args.no_sysctls:
        set_sysctls(prefix_of(args))
    return asyncio.run(_main(args, config, node))


def set_sysctls(prefix: Sequence[str] = ()) -> None:
    """The sysctls the rules rely on, set where they are not (a warning when that fails)."""
    for key, want in SYSCTLS.items():
        name = key.replace("/", ".")
        try:
            have = subprocess.run(
                [*prefix, "sysctl", "-n", name], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            if have != want:
                subprocess.run(
                    [*prefix, "sysctl", "-qw", f"{name}={want}"], capture_output=True, text=True, timeout=10, check=True
                )
                log.info("set %s = %s", name, want)
        except (OSError, subprocess.SubprocessError) as e:
            log.warning("cannot set %s = %s (%s): some Service traffic will not work", name, want, e)


async def _main(args: argparse.Namespace, config: kubeconfig.ClientConfig, node: rules.Node) -> int:
    metrics = Metrics()
    client = RestClient(config, user_agent="raftkube-proxy")
    try:
        factory = InformerFactory(client)
        prefix = prefix_of(args)
        proxier = Proxier(
            factory.informer(SERVICES),
            factory.informer(SLICES),
            node,
            apply=lambda rs, previous: nft.apply(rs, previous, prefix=prefix),
            remove=lambda table: nft.remove(table, prefix=prefix),
            tables=lambda: nft.tables(prefix=prefix),
            metrics=metrics,
            min_interval=args.min_sync_period,
            resync=args.sync_period,
        )
        health = health_server(args, metrics.registry, proxier.healthy)
        log.info("proxy for node %s: table %s", node.name, rules.table_name(node.name))
        return await run_component("the proxy", proxier.run, log, health)
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftkube proxy")
    add_arguments(parser)
    return run(parser.parse_args(argv))
