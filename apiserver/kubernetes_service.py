"""The `default/kubernetes` Service, its Endpoints and its EndpointSlice, kept by the apiserver
as kube-apiserver's bootstrap controller keeps them (pkg/controlplane/controller/kubernetesservice
and the endpoint reconciler): in-cluster clients find the API there.

The Service's ClusterIP is the first address of the service CIDR (10.96.0.1 for 10.96.0.0/16),
its port 443 named `https` targets the apiserver's secure port; the Endpoints and the slice hold
the advertised address of every live apiserver (apiserver/master_leases.py, kube's lease
reconciler) and the advertised port.  The loop makes them when missing, puts back the
fields it owns when someone changed them, and leaves everything else (other labels,
annotations) alone.  This takes the
first address; the allocator (apiserver/service_allocation.py) records it as taken when the
Service is written, as it does any asked-for address.

It writes through the registries, so admission and validation see these writes as any other.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from apiserver import errors
from apiserver.master_leases import MasterLeases
from apiserver.patch.jsonvalue import deep_copy
from apiserver.registry.generic import Registry
from machinery import kept_objects
from machinery.objects import Obj

log = logging.getLogger("raftkube.apiserver")

NAMESPACE = "default"
NAME = "kubernetes"
SERVICE_PORT = 443
PORT_NAME = "https"
MANAGER = "kube-apiserver"
DEFAULT_SERVICE_CIDR = "10.96.0.0/16"
INTERVAL_SECONDS = 10.0  # kube's EndpointReconcilerInterval
SERVICE_LABELS = {"component": "apiserver", "provider": "kubernetes"}
# the label kube's reconciler puts on the slice it manages
SLICE_LABELS = {"kubernetes.io/service-name": NAME, "endpointslice.kubernetes.io/managed-by": "kube-apiserver"}


def first_address(cidr: str) -> str:
    """The first usable address of a service CIDR: the `kubernetes` Service's ClusterIP.
    ValueError for a CIDR that is not one (host bits set, too small to hold an address)."""
    net = ipaddress.ip_network(cidr, strict=True)
    if net.num_addresses < 4:  # kube: the network, the kubernetes Service, one more, the broadcast
        raise ValueError(f"{cidr}: too small for a service range (at least /30 or /126)")
    return str(net.network_address + 1)


@dataclass(frozen=True)
class KubernetesService:
    """Where the API is: the Service's ClusterIP and the apiserver's advertised address and port."""

    cluster_ip: str
    address: str
    port: int
    service_cidr: str = DEFAULT_SERVICE_CIDR  # where every Service's ClusterIP comes from
    self_advertised: bool = True
    """The advertised address and port are this apiserver's own (not a balancer's in front of
    several): stopping, it takes its address out (MasterLeases.release)."""

    @classmethod
    def of(cls, service_cidr: str, address: str, port: int, self_advertised: bool = True) -> KubernetesService:
        cidr = str(ipaddress.ip_network(service_cidr, strict=True))
        return cls(first_address(service_cidr), address, port, cidr, self_advertised)

    @property
    def family(self) -> str:
        return "IPv6" if ipaddress.ip_address(self.address).version == 6 else "IPv4"

    def service(self) -> Obj:
        return {
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(SERVICE_LABELS)},
            "spec": {
                "type": "ClusterIP",
                "clusterIP": self.cluster_ip,
                "clusterIPs": [self.cluster_ip],
                "sessionAffinity": "None",
                "ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "protocol": "TCP", "targetPort": self.port}],
            },
        }

    def _addresses(self, addresses: Sequence[str] | None) -> list[str]:
        """The live apiservers' addresses of this family (this one's when none is known)."""
        family = ipaddress.ip_address(self.address).version
        same = [a for a in addresses or () if ipaddress.ip_address(a).version == family]
        return same or [self.address]

    def endpoints(self, addresses: Sequence[str] | None = None) -> Obj:
        return {
            "metadata": {
                "name": NAME,
                "namespace": NAMESPACE,
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
            },
            "subsets": [
                {
                    "addresses": [{"ip": a} for a in self._addresses(addresses)],
                    "ports": [{"name": PORT_NAME, "port": self.port, "protocol": "TCP"}],
                }
            ],
        }

    def endpoint_slice(self, addresses: Sequence[str] | None = None) -> Obj:
        return {
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(SLICE_LABELS)},
            "addressType": self.family,
            "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in self._addresses(addresses)],
            "ports": [{"name": PORT_NAME, "port": self.port, "protocol": "TCP"}],
        }


@dataclass(frozen=True)
class RegistryObject:
    """One object of a registry, read and written as machinery.kept_objects asks."""

    registry: Registry
    namespace: str | None
    name: str
    manager: str = MANAGER

    async def get(self) -> Obj | None:
        try:
            return await self.registry.get(self.namespace, self.name)
        except errors.StatusError as e:
            if e.code == 404:
                return None
            raise

    async def create(self, obj: Obj) -> bool:
        try:
            await self.registry.create(self.namespace, deep_copy(obj), manager=self.manager)
            return True
        except errors.StatusError as e:
            if e.code == 409:
                return False
            raise

    async def replace(self, obj: Obj) -> bool:
        try:
            await self.registry.update(self.namespace, self.name, obj, manager=self.manager)
            return True
        except errors.StatusError as e:
            if e.code in (404, 409):
                return False
            raise


async def keep_object(registry: Registry, want: Obj, manager: str = MANAGER) -> str:
    """Make `want` exist with the fields it sets (machinery.kept_objects: labels merged, the
    rest left alone); what was done, for the log.  Also what keeps
    kube-system/extension-apiserver-authentication and the local APIServices."""
    where = RegistryObject(registry, want["metadata"].get("namespace"), want["metadata"]["name"], manager)
    return await kept_objects.keep_object(where, want)


async def reconcile(
    target: KubernetesService,
    services: Registry,
    endpoints: Registry,
    slices: Registry,
    addresses: Sequence[str] | None = None,
) -> None:
    """One round: each of the three objects made or fixed, the endpoints naming `addresses`
    (the live apiservers; None: this one); a failure is logged, not raised, so one broken
    object does not keep the others from being kept."""
    for registry, want in (
        (services, target.service()),
        (endpoints, target.endpoints(addresses)),
        (slices, target.endpoint_slice(addresses)),
    ):
        what = registry.resource.plural
        try:
            done = await keep_object(registry, want)
        except errors.StatusError as e:
            log.warning("default/kubernetes %s: could not keep it: %s", what, e.message)
            continue
        if done:
            log.info("default/kubernetes %s: %s", what, done)


async def keep_forever(
    target: KubernetesService,
    services: Registry,
    endpoints: Registry,
    slices: Registry,
    interval: float = INTERVAL_SECONDS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    leases: MasterLeases | None = None,
) -> None:
    """Reconcile now and every `interval` seconds until cancelled: a deleted object is back
    within one interval, as kube's reconciler brings it back.  With `leases`, each round first
    renews this apiserver's lease and names every live apiserver."""
    while True:
        try:
            addresses = None
            if leases is not None:
                await leases.renew()
                addresses = await leases.live()
            await reconcile(target, services, endpoints, slices, addresses)
        except Exception:  # the loop outlives any one round's surprise; it is logged
            log.exception("default/kubernetes: reconcile round failed")
        await sleep(interval)
