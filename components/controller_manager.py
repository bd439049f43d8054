"""`raftkube controller-manager`: every controller in one process, one credential, one leader.

It talks only to the apiserver (the kubeconfig's server, with the kubeconfig's identity).  With
leader election on (the default) it campaigns for the Lease `kube-system/kube-controller-manager`
and runs the controllers only while it leads, so a standby can wait beside it; losing the lease
stops the controllers and ends the process with status 1 (a supervisor restarts it, as kube's
does).  SIGTERM/SIGINT stop it cleanly: controllers stop, the lease is released, status 0
(`components.runner`).
The CA published in every namespace's `kube-root-ca.crt` is `--root-ca-file`, or else the one
the kubeconfig trusts the apiserver by (kube's default): the CA that signed the serving certificate.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from components.client import kubeconfig
from components.client.rest import RestClient
from components.controllers._slice_mirroring import MAX_ENDPOINTS_PER_SUBSET
from components.controllers.base import Controller
from components.controllers.endpointslicemirroring import EndpointSliceMirroringController
from components.controllers.horizontalpodautoscaler import SYNC_S as HPA_SYNC_S
from components.controllers.horizontalpodautoscaler import HorizontalPodAutoscalerController
from components.controllers.nodelifecycle import GRACE_PERIOD_S, NodeLifecycleController
from components.controllers.registry import CONTROLLERS, select
from components.controllers.rootcacertpublisher import RootCACertPublisher
from components.controllers.runner import ControllerMaker, running
from components.health import LOOPBACK, HealthServer, add_health_flags, check_health_flags
from components.runner import LeaderElection, run_component

log = logging.getLogger("raftkube.controller-manager")
LEASE_NAME = "kube-controller-manager"


@dataclass
class Options:
    kubeconfig: str | None
    controllers: list[type[Controller]]
    leader_elect: bool
    lease_duration: float
    renew_deadline: float
    retry_period: float
    health_port: int
    root_ca: bytes | None = None  # --root-ca-file's PEM; None: the kubeconfig's CA
    node_monitor_grace_period: float = GRACE_PERIOD_S
    mirroring_max_endpoints_per_subset: int = MAX_ENDPOINTS_PER_SUBSET
    hpa_sync_period: float = HPA_SYNC_S
    health_address: str = LOOPBACK


def controller_makers(opts: Options, config: kubeconfig.ClientConfig) -> list[ControllerMaker]:
    """The selected controllers with their own options bound; ValueError when the
    root-ca-cert-publisher is selected but has no CA to publish."""
    out: list[ControllerMaker] = []
    for c in opts.controllers:
        if c is RootCACertPublisher:
            root_ca = opts.root_ca or config.ca_data
            if not root_ca:
                raise ValueError("--root-ca-file: the root-ca-cert-publisher needs a CA, and the kubeconfig names none")
            out.append(functools.partial(RootCACertPublisher, root_ca=root_ca))
        elif c is NodeLifecycleController:
            out.append(functools.partial(NodeLifecycleController, grace_period=opts.node_monitor_grace_period))
        elif c is EndpointSliceMirroringController:
            out.append(
                functools.partial(
                    EndpointSliceMirroringController,
                    max_endpoints_per_subset=opts.mirroring_max_endpoints_per_subset,
                )
            )
        elif c is HorizontalPodAutoscalerController:
            out.append(functools.partial(HorizontalPodAutoscalerController, sync_period=opts.hpa_sync_period))
        else:
            out.append(c)
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="the kubeconfig with the apiserver and this process's identity")
    p.add_argument(
        "--controllers",
        default="*",
        help=f"comma-separated: * (all), name, -name (known: {', '.join(sorted(CONTROLLERS))})",
    )
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True, help="campaign for a Lease")
    p.add_argument("--leader-elect-lease-duration", dest="lease_duration", type=float, default=15.0)
    p.add_argument("--leader-elect-renew-deadline", dest="renew_deadline", type=float, default=10.0)
    p.add_argument("--leader-elect-retry-period", dest="retry_period", type=float, default=2.0)
    p.add_argument(
        "--root-ca-file",
        help="the PEM CA bundle published in each namespace's kube-root-ca.crt (default: the kubeconfig's CA)",
    )
    p.add_argument(
        "--node-monitor-grace-period",
        dest="node_monitor_grace_period",
        type=float,
        default=GRACE_PERIOD_S,
        help=f"seconds a node may go unheard before it is marked NotReady (default {GRACE_PERIOD_S:g}; "
        "keep it above the kubelets' 10 s lease renewal)",
    )
    p.add_argument(
        "--mirroring-max-endpoints-per-subset",
        dest="mirroring_max_endpoints_per_subset",
        type=int,
        default=MAX_ENDPOINTS_PER_SUBSET,
        help=f"the most addresses of one Endpoints subset mirrored into EndpointSlices, 1 to 1000 "
        f"(default {MAX_ENDPOINTS_PER_SUBSET})",
    )
    p.add_argument(
        "--horizontal-pod-autoscaler-sync-period",
        dest="hpa_sync_period",
        type=float,
        default=HPA_SYNC_S,
        help=f"seconds between an autoscaler's passes (default {HPA_SYNC_S:g}, as kube)",
    )
    add_health_flags(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log every reconcile failure and leader change")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("controller-manager", help="run the controllers (deployments, replicasets, namespaces, ...)")
    add_arguments(p)
    p.set_defaults(run=run)


def options(args: argparse.Namespace) -> Options:
    """Checked options; ValueError names the flag."""
    check_health_flags(args)
    if not args.lease_duration > args.renew_deadline > args.retry_period > 0:
        raise ValueError(
            "--leader-elect-lease-duration > --leader-elect-renew-deadline > --leader-elect-retry-period > 0"
            f" must hold, got {args.lease_duration}, {args.renew_deadline}, {args.retry_period}"
        )
    if not (math.isfinite(args.node_monitor_grace_period) and args.node_monitor_grace_period > 0):
        raise ValueError(
            f"--node-monitor-grace-period must be a positive number of seconds, got {args.node_monitor_grace_period}"
        )
    if not (math.isfinite(args.hpa_sync_period) and args.hpa_sync_period > 0):
        raise ValueError(
            f"--horizontal-pod-autoscaler-sync-period must be a positive number of seconds, got {args.hpa_sync_period}"
        )
    if not 1 <= args.mirroring_max_endpoints_per_subset <= 1000:
        raise ValueError(
            "--mirroring-max-endpoints-per-subset must be from 1 to 1000,"
            f" got {args.mirroring_max_endpoints_per_subset}"
        )
    return Options(
        args.kubeconfig,
        select(args.controllers),
        args.leader_elect,
        args.lease_duration,
        args.renew_deadline,
        args.retry_period,
        args.health_port,
        read_root_ca(args.root_ca_file) if args.root_ca_file else None,
        args.node_monitor_grace_period,
        args.mirroring_max_endpoints_per_subset,
        args.hpa_sync_period,
        args.health_address,
    )


def read_root_ca(path: str) -> bytes:
    """The file's PEM, checked to hold certificates (a typo would otherwise reach every pod)."""
    try:
        pem = Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"--root-ca-file: {path}: {e.strerror}") from None
    try:
        x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise ValueError(f"--root-ca-file: {path}: not PEM certificates") from None
    return pem


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s"
    )
    try:
        opts = options(args)
        config = kubeconfig.load(opts.kubeconfig)
        makers = controller_makers(opts, config)
    except (ValueError, kubeconfig.KubeconfigError) as e:
        print(f"raftkube controller-manager: {e}", file=sys.stderr)
        return 2
    return asyncio.run(serve(opts, config, makers))


class ControllerMetrics(Collector):
    """Reconciles, failures and queue depth of the controllers running now."""

    def __init__(self) -> None:
        self.controllers: list[Controller] = []

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        reconciles = CounterMetricFamily("raftkube_controller_reconciles", "Keys reconciled", labels=["controller"])
        failures = CounterMetricFamily("raftkube_controller_failures", "Reconciles that failed", labels=["controller"])
        depth = GaugeMetricFamily("raftkube_controller_queue_depth", "Keys waiting", labels=["controller"])
        for c in self.controllers:
            reconciles.add_metric([c.name], c.reconciles)
            failures.add_metric([c.name], c.failures)
            depth.add_metric([c.name], c.queue.len())
        yield from (reconciles, failures, depth)


async def serve(opts: Options, config: kubeconfig.ClientConfig, makers: list[ControllerMaker]) -> int:
    metrics = ControllerMetrics()
    registry = CollectorRegistry()
    registry.register(metrics)
    health = HealthServer(opts.health_port, registry, lambda: None, host=opts.health_address)
    async with RestClient(config, user_agent="raftkube-controller-manager") as client:

        async def lead() -> None:
            async with running(client, makers) as controllers:
                metrics.controllers = controllers
                log.warning("controllers running: %s", ", ".join(c.name for c in controllers))
                try:
                    await asyncio.Event().wait()
                finally:
                    metrics.controllers = []

        election = None
        if opts.leader_elect:
            election = LeaderElection(
                client,
                LEASE_NAME,
                lease_duration=opts.lease_duration,
                renew_deadline=opts.renew_deadline,
                retry_period=opts.retry_period,
                on_new_leader=lambda who: log.warning("leader: %s", who),
            )
        return await run_component("the controllers", lead, log, health, election)
