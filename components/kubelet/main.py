"""`raftkube kubelet`: one node's agent as its own process.

    raftkube kubelet --kubeconfig K --node-name N --root-dir D [--address 127.0.0.1]
                     [--capacity cpu=4,memory=8Gi,pods=110] [--system-reserved cpu=100m]
                     [--port 10250 --tls-cert-file C --tls-private-key-file K --client-ca-file CA]
                     [--health-port P [--health-address A]] [--pod-network host|netns --pod-cidr 10.244.1.0/24]
                     [--cluster-dns 10.96.0.10 --cluster-domain cluster.local] [--images JSON]

It talks to the apiserver as `system:node:<N>` (the kubeconfig `raftkube up` writes for it),
runs its pods' containers as processes under D, and serves /healthz and /metrics on a loopback
port (its host's address with --health-address, on a host of its own). With the TLS flags it
serves its HTTPS API on --address:--port (server.py: logs, exec, port-forward for the
apiserver). With `--pod-network netns` (root only) each pod gets a network namespace and an
address of --pod-cidr (podnet.py); by default pods share the host's network and their IP is
--address. With --cluster-dns pods get the cluster's DNS server in their resolv.conf (resolv.py)
and the `kubernetes` Service's variables name its ClusterIP (a service proxy is expected to
forward it). --images (JSON, as [[kubelets.images]] in cluster.toml) adds entries to the image
table before the shipped ones (images.py). SIGTERM/SIGINT stop the kubelet (status 0), not the
containers: a kubelet started again on the same root dir adopts them. A kubelet that fails or
ends exits with status 1 (`components.runner`). Bad flags exit with status 2, naming the flag.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import re
import shutil
import ssl
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry

from components.client import kubeconfig
from components.client.rest import RestClient
from components.health import HealthServer, add_health_flags, check_health_flags
from components.kubelet import images, ipam, podnet, resolv
from components.kubelet.kubelet import Kubelet
from components.kubelet.nodestatus import NodeConfig, NodeConfigError, allocatable
from components.kubelet.process_runtime import ProcessRuntime
from components.kubelet.server import KubeletServer
from components.runner import run_component
from machinery.process import pki

log = logging.getLogger("raftkube.kubelet")
POD_NETWORKS = ("host", "netns")
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def parse_pairs(text: str, flag: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"{flag}: expected name=quantity pairs separated by commas, got {item!r}")
        out[key] = value
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="the kubeconfig with the apiserver and this node's identity")
    p.add_argument("--node-name", required=True, help="the Node this kubelet registers and runs pods for")
    p.add_argument("--root-dir", required=True, type=Path, help="where containers' runs and logs are kept")
    p.add_argument("--address", default="127.0.0.1", help="the node's InternalIP (and its pods', host network)")
    p.add_argument("--port", type=int, default=10250, help="the kubelet's HTTPS port (reported in the Node)")
    p.add_argument("--capacity", default="cpu=4,memory=8Gi,pods=110", help="the node's capacity, name=quantity,...")
    p.add_argument("--system-reserved", default="", help="capacity kept from pods, name=quantity,...")
    p.add_argument("--tls-cert-file", type=Path, help="the kubelet's serving certificate (with the next two: HTTPS on)")
    p.add_argument("--tls-private-key-file", type=Path, help="its private key")
    p.add_argument("--client-ca-file", type=Path, help="the CA whose client certificates may call the kubelet")
    add_health_flags(p)
    p.add_argument(
        "--pod-network",
        choices=POD_NETWORKS,
        default="host",
        help="host: pods share the node's network; netns: a namespace and an IP of --pod-cidr each (root)",
    )
    p.add_argument("--pod-cidr", help="the node's pod addresses with --pod-network netns, like 10.244.1.0/24")
    p.add_argument(
        "--cluster-dns",
        default="",
        help="the cluster DNS server's address(es), comma-separated: pods with dnsPolicy ClusterFirst use them",
    )
    p.add_argument("--cluster-domain", default="cluster.local", help="the cluster's DNS domain (default %(default)s)")
    p.add_argument("--images", default="", help="image table entries before the shipped ones, a JSON array of tables")
    p.add_argument("-v", "--verbose", action="store_true", help="log every pod sync failure")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("kubelet", help="run a node: register it and run the pods bound to it as processes")
    add_arguments(p)
    p.set_defaults(run=run)


def node_config(args: argparse.Namespace) -> NodeConfig:
    """The checked node settings; ValueError names the flag."""
    if not _NODE_NAME.match(args.node_name) or len(args.node_name) > 63:
        raise ValueError(f"--node-name: {args.node_name!r} is not a valid node name (lowercase DNS name)")
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be from 1 to 65535, got {args.port}")
    check_health_flags(args)
    config = NodeConfig(
        args.node_name,
        args.address,
        args.port,
        capacity=parse_pairs(args.capacity, "--capacity"),
        reserved=parse_pairs(args.system_reserved, "--system-reserved"),
    )
    try:
        allocatable(config)
    except NodeConfigError as e:
        raise ValueError(f"--capacity/--system-reserved: {e}") from None
    return config


def check_pod_network(mode: str, cidr: str | None, euid: int, have_ip: bool) -> str | None:
    """The pod CIDR to give pods addresses of (None: the host network); ValueError names the flag."""
    if mode not in POD_NETWORKS:
        raise ValueError(f"--pod-network must be host or netns, got {mode!r}")
    if mode == "host":
        if cidr is not None:
            raise ValueError("--pod-cidr goes with --pod-network netns (host network pods have the node's IP)")
        return None
    if cidr is None:
        raise ValueError("--pod-cidr is required with --pod-network netns")
    try:
        ipam.parse_cidr(cidr)
    except ipam.IpamError as e:
        raise ValueError(f"--pod-cidr: {e}") from None
    if euid != 0:
        raise ValueError("--pod-network netns needs root (network namespaces, veth pairs and a bridge)")
    if not have_ip:
        raise ValueError("--pod-network netns needs iproute2's `ip` command on PATH")
    return cidr


def cluster_dns(servers: str, domain: str) -> resolv.ClusterDNS | None:
    """--cluster-dns and --cluster-domain, checked; ValueError names the flag."""
    addresses = tuple(s.strip() for s in servers.split(",") if s.strip())
    for address in addresses:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ValueError(f"--cluster-dns: {address!r} is not an IP address") from None
    labels = domain.rstrip(".").split(".")
    if not domain or any(not _LABEL.match(label) for label in labels) or len(domain) > 253:
        raise ValueError(f"--cluster-domain: {domain!r} is not a DNS domain")
    return resolv.ClusterDNS(addresses, domain.rstrip(".")) if addresses else None


def image_table(text: str) -> images.HostImages:
    """The image table: --images' entries (JSON) before the shipped ones; ValueError names the flag."""
    if not text:
        return images.HostImages()
    try:
        items = json.loads(text)
    except ValueError as e:
        raise ValueError(f"--images: not JSON: {e}") from None
    return images.HostImages(images.parse_entries(items, "--images"))


def server_tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The HTTPS server's context (client certificates required), or None when not asked for."""
    files = (args.tls_cert_file, args.tls_private_key_file, args.client_ca_file)
    if all(f is None for f in files):
        return None
    if any(f is None for f in files):
        raise ValueError("--tls-cert-file, --tls-private-key-file and --client-ca-file go together")
    try:
        return pki.server_context(pki.CertFiles(*files), require_client_cert=True)
    except pki.PKIError as e:
        flag = {args.tls_cert_file: "--tls-cert-file", args.tls_private_key_file: "--tls-private-key-file"}.get(
            e.path, "--client-ca-file"
        )
        raise ValueError(f"{flag}: {e}") from None


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s"
    )
    try:
        config = node_config(args)
        tls = server_tls(args)
        cidr = check_pod_network(args.pod_network, args.pod_cidr, os.geteuid(), shutil.which("ip") is not None)
        table = image_table(args.images)
        dns = cluster_dns(args.cluster_dns, args.cluster_domain)
        client_config = kubeconfig.load(args.kubeconfig)
    except (ValueError, kubeconfig.KubeconfigError) as e:
        print(f"raftkube kubelet: {e}", file=sys.stderr)
        return 2
    network = None
    if cidr is not None:
        network = podnet.PodNetwork(args.root_dir, config.name, cidr)
        try:
            network.ensure_bridge()  # a host that cannot have one says so now, not per pod
        except podnet.PodNetError as e:
            print(f"raftkube kubelet: the pod network: {e}", file=sys.stderr)
            return 1
        if not podnet.forwarding_enabled():
            log.warning(
                "net.ipv4.ip_forward is 0 (left as it is): this node's pods reach the host and each other,"
                " not the pods of other nodes on this machine"
            )
    health = HealthServer(args.health_port, CollectorRegistry(), lambda: None, host=args.health_address)
    return asyncio.run(serve(config, client_config, args.root_dir, health, tls, network, table, dns))


async def serve(
    config: NodeConfig,
    client_config: kubeconfig.ClientConfig,
    root: Path,
    health: HealthServer,
    tls: ssl.SSLContext | None = None,
    network: podnet.PodNetwork | None = None,
    table: images.HostImages | None = None,
    dns: resolv.ClusterDNS | None = None,
) -> int:
    async with RestClient(client_config, user_agent=f"raftkube-kubelet/{config.name}") as client:
        runtime = ProcessRuntime(root)
        kubelet = Kubelet(client, config, runtime, network=network, images=table, dns=dns)
        server = KubeletServer(kubelet, runtime, tls) if tls is not None else None

        async def work() -> None:
            # a stop leaves the containers running: the next kubelet on this root adopts them
            try:
                if server is not None:
                    await server.start(config.address, config.port)
                await kubelet.run()
            finally:
                if server is not None:
                    with contextlib.suppress(Exception):
                        await server.stop()

        return await run_component("the kubelet", work, log, health)
