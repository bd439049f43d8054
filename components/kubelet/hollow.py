"""`raftkube hollow-nodes --count N`: many kubelets in one process, with the fake runtime, for
testing the control plane at scale (kube's kubemark).

    raftkube hollow-nodes --kubeconfig K --count 1000 [--prefix hollow-] [--capacity ...]
                          [--sync-period 5] [--health-port P] [--health-address A]

Each hollow node is a whole `Kubelet` (its Node, its Lease renewed every 10 s, node status,
pod workers and pods/status) over a `FakeRuntime`.  What they share: one connection pool
(each node's requests impersonate `system:node:<name>` in `system:nodes`, so the Node
authorizer judges them as it judges a real kubelet; the kubeconfig's identity needs the
`impersonate` verb) and one pod informer for the whole cluster, indexed by node name, whose
events wake the node concerned.  Nodes register a few at a time so that a thousand do not
hit the apiserver at once, and each renews its Lease on its own 10 s phase.
Hollow nodes serve no HTTPS API: logs and exec of their pods are not available.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import re
import sys
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from components.client import kubeconfig
from components.client.indexer import NAMESPACE_INDEX, NODE_NAME_INDEX
from components.client.informer import EventHandler, InformerFactory
from components.client.rest import RestClient
from components.health import add_health_flags, check_health_flags, health_server
from components.kubelet.config import HOLLOW_LABEL
from components.kubelet.fake_runtime import FakeRuntime
from components.kubelet.kubelet import PODS, SERVICES, Kubelet
from components.kubelet.main import parse_pairs
from components.kubelet.nodestatus import NodeConfig, NodeConfigError, allocatable
from components.runner import run_component
from machinery.objects import Obj

log = logging.getLogger("raftkube.hollow")
MAX_COUNT = 5000
NODES_GROUP = "system:nodes"
REGISTER_AT_ONCE = 20
FIRST_ADDRESS = ipaddress.ip_address("10.64.0.1")  # hollow nodes' InternalIPs: unique, never dialled
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[-a-z0-9])?$")


class HollowNodes:
    def __init__(
        self,
        client: RestClient,
        names: list[str],
        capacity: dict[str, str],
        reserved: dict[str, str],
        clock: Callable[[], float] = time.time,
        sync_period: float = 5.0,
    ) -> None:
        self.client = client
        self.clock = clock
        self.factory = InformerFactory(client)
        self.pods = self.factory.informer(PODS)
        self.services = self.factory.informer(SERVICES)
        self.kubelets: dict[str, Kubelet] = {}
        for i, name in enumerate(names):
            config = NodeConfig(
                name, str(FIRST_ADDRESS + i), 10250, capacity=capacity, reserved=reserved, labels={HOLLOW_LABEL: "true"}
            )
            self.kubelets[name] = Kubelet(
                client.impersonating(f"system:node:{name}", (NODES_GROUP,)),
                config,
                FakeRuntime(clock),
                clock,
                bound=lambda name=name: self.pods.indexer.by_index(NODE_NAME_INDEX, name),  # type: ignore[misc]
                sync_period=sync_period,
                services=lambda ns: self.services.indexer.by_index(NAMESPACE_INDEX, ns),
            )
        self.pods.add_handler(EventHandler(self._changed, lambda _old, new: self._changed(new), self._changed))

    def _changed(self, pod: Obj) -> None:
        kubelet = self.kubelets.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if kubelet is not None:
            kubelet.wake()

    async def run(self) -> None:
        self.factory.start()
        await self.factory.wait_for_sync(timeout=60.0)
        gate = asyncio.Semaphore(REGISTER_AT_ONCE)
        tasks = [asyncio.create_task(self._one(kubelet, gate)) for kubelet in self.kubelets.values()]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.factory.stop()

    async def _one(self, kubelet: Kubelet, gate: asyncio.Semaphore) -> None:
        async with gate:
            await kubelet.register()
        await kubelet.run(register=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="an identity that may impersonate system:node:<name> (up's hollow-nodes)")
    p.add_argument("--count", type=int, required=True, help=f"how many nodes, 1-{MAX_COUNT}")
    p.add_argument("--prefix", default="hollow-", help="node names are <prefix>1 ... <prefix>N (default hollow-)")
    p.add_argument("--capacity", default="cpu=4,memory=8Gi,pods=110", help="each node's capacity, name=quantity,...")
    p.add_argument("--system-reserved", default="", help="capacity kept from pods, name=quantity,...")
    p.add_argument("--sync-period", type=float, default=5.0, help="seconds between a node's pod syncs (0.2-60)")
    add_health_flags(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log every failed sync")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("hollow-nodes", help="run many simulated nodes (fake containers) in one process")
    add_arguments(p)
    p.set_defaults(run=run)


def node_names(args: argparse.Namespace) -> list[str]:
    """The nodes asked for; ValueError names the flag."""
    if not 1 <= args.count <= MAX_COUNT:
        raise ValueError(f"--count must be from 1 to {MAX_COUNT}, got {args.count}")
    if not _PREFIX.match(args.prefix) or len(args.prefix) > 40:
        raise ValueError(f"--prefix: {args.prefix!r} must be lowercase letters, digits and '-' (at most 40)")
    if not 0.2 <= args.sync_period <= 60:
        raise ValueError(f"--sync-period must be from 0.2 to 60 seconds, got {args.sync_period}")
    check_health_flags(args)
    return [f"{args.prefix}{i}" for i in range(1, args.count + 1)]


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s"
    )
    try:
        names = node_names(args)
        capacity = parse_pairs(args.capacity, "--capacity")
        reserved = parse_pairs(args.system_reserved, "--system-reserved")
        allocatable(NodeConfig(names[0], "10.64.0.1", 10250, capacity=capacity, reserved=reserved))
        client_config = kubeconfig.load(args.kubeconfig)
    except NodeConfigError as e:
        print(f"raftkube hollow-nodes: --capacity/--system-reserved: {e}", file=sys.stderr)
        return 2
    except (ValueError, kubeconfig.KubeconfigError) as e:
        print(f"raftkube hollow-nodes: {e}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(client_config, names, capacity, reserved, args.sync_period, args))


async def _serve(
    client_config: kubeconfig.ClientConfig,
    names: list[str],
    capacity: dict[str, str],
    reserved: dict[str, str],
    sync_period: float,
    health_flags: argparse.Namespace,
) -> int:
    health = health_server(health_flags, CollectorRegistry(), lambda: None)
    async with RestClient(client_config, user_agent="raftkube-hollow-nodes", max_connections=64) as client:
        hollow = HollowNodes(client, names, capacity, reserved, sync_period=sync_period)
        return await run_component("the hollow nodes", hollow.run, log, health)
