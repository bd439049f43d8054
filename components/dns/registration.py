"""The `kube-system/kube-dns` Service and this server's EndpointSlice, kept as the apiserver keeps
`default/kubernetes` (apiserver/kubernetes_service.py): pods' resolv.conf names the Service's
ClusterIP, and the service proxy sends it to the address the slice holds.

The Service is CoreDNS's as kubeadm installs it: labels `k8s-app: kube-dns` and
`kubernetes.io/name: CoreDNS`, ports dns 53/UDP, dns-tcp 53/TCP and metrics 9153/TCP, no selector
(so the endpointslice controller leaves its endpoints to us).  The slice
`kube-dns-raftkube` (managed-by `raftkube-dns`) holds the advertised address and port.  Each round
keeps both as machinery.kept_objects says (the apiserver keeps `default/kubernetes` by the same
rule): what is missing is made, the fields it owns are put back when someone changed them,
everything else is left alone; the ClusterIP is set on create only (it is immutable).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from components.client.listwatch import Resource
from components.client.rest import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    NotFoundError,
    RestClient,
    TransportError,
)
from machinery import kept_objects
from machinery.objects import Obj

log = logging.getLogger("raftkube.dns")

NAMESPACE = "kube-system"
SERVICE_NAME = "kube-dns"
SLICE_NAME = "kube-dns-raftkube"
MANAGER = "raftkube-dns"
DEFAULT_SERVICE_IP = "10.96.0.10"  # kubeadm's: the tenth address of the service CIDR
METRICS_PORT = 9153
INTERVAL_SECONDS = 10.0
SERVICE_LABELS = {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}
SLICE_LABELS = {"kubernetes.io/service-name": SERVICE_NAME, "endpointslice.kubernetes.io/managed-by": MANAGER}

SERVICES = Resource("", "v1", "services", kind="Service")
SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", kind="EndpointSlice")


@dataclass(frozen=True)
class KubeDNS:
    """The Service's ClusterIP, and where this server answers (`metrics_port` 0: not served)."""

    cluster_ip: str
    address: str
    port: int
    metrics_port: int = 0

    def service(self) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE, "labels": dict(SERVICE_LABELS)},
            "spec": {
                "type": "ClusterIP",
                "clusterIP": self.cluster_ip,
                "clusterIPs": [self.cluster_ip],
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": self.port},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": self.port},
                    {
                        "name": "metrics",
                        "port": METRICS_PORT,
                        "protocol": "TCP",
                        "targetPort": self.metrics_port or METRICS_PORT,
                    },
                ],
            },
        }

    def endpoint_slice(self) -> Obj:
        family = "IPv6" if ipaddress.ip_address(self.address).version == 6 else "IPv4"
        ports = [
            {"name": "dns", "port": self.port, "protocol": "UDP"},
            {"name": "dns-tcp", "port": self.port, "protocol": "TCP"},
        ]
        if self.metrics_port:
            ports.append({"name": "metrics", "port": self.metrics_port, "protocol": "TCP"})
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": SLICE_NAME, "namespace": NAMESPACE, "labels": dict(SLICE_LABELS)},
            "addressType": family,
            "endpoints": [{"addresses": [self.address], "conditions": {"ready": True}}],
            "ports": ports,
        }


@dataclass(frozen=True)
class ApiObject:
    """One object in kube-system through the REST client, read and written as
    machinery.kept_objects asks."""

    client: RestClient
    resource: Resource
    name: str

    async def get(self) -> Obj | None:
        try:
            return await self.client.get(self.resource.path(NAMESPACE, self.name))
        except NotFoundError:
            return None

    async def create(self, obj: Obj) -> bool:
        try:
            await self.client.create(self.resource.path(NAMESPACE), obj, params={"fieldManager": MANAGER})
            return True
        except AlreadyExistsError:
            return False

    async def replace(self, obj: Obj) -> bool:
        try:
            await self.client.replace(self.resource.path(NAMESPACE, self.name), obj, params={"fieldManager": MANAGER})
            return True
        except (ConflictError, NotFoundError):
            return False


async def keep_object(client: RestClient, resource: Resource, want: Obj) -> str:
    """Make `want` exist with the fields it sets (machinery.kept_objects); what was done, for the log."""
    return await kept_objects.keep_object(ApiObject(client, resource, want["metadata"]["name"]), want)


async def reconcile(client: RestClient, target: KubeDNS) -> bool:
    """One round over the Service and the slice; whether both are as wanted.  Failures are
    logged, not raised, so one object's trouble does not keep the other from being kept."""
    ok = True
    for resource, want in ((SERVICES, target.service()), (SLICES, target.endpoint_slice())):
        try:
            done = await keep_object(client, resource, want)
        except (ApiError, TransportError) as e:
            log.warning("%s/%s %s: could not keep it: %s", NAMESPACE, want["metadata"]["name"], resource.plural, e)
            ok = False
            continue
        if done:
            log.info("%s/%s %s: %s", NAMESPACE, want["metadata"]["name"], resource.plural, done)
        ok = ok and done != "raced"
    return ok


async def keep_forever(
    client: RestClient,
    target: KubeDNS,
    interval: float = INTERVAL_SECONDS,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> None:
    """Reconcile now and every `interval` seconds until cancelled: a deleted object is back
    within one interval."""
    while True:
        try:
            await reconcile(client, target)
        except Exception:  # the loop outlives any one round's surprise; it is logged
            log.exception("kube-dns registration: round failed")
        await sleep(interval)
