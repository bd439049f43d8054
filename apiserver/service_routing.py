"""A Service reference (namespace, name, port) -> one ready endpoint's address, as kube-apiserver
routes to a webhook's or an APIService's service with `--enable-aggregator-routing=true`.

raftkube has no ClusterIPs and no service proxy: pods share their node's network, so the only
way to reach a Service from the apiserver is through its endpoints.  The rules are v1.33's
k8s.io/apiserver `proxy.ResolveEndpoint` (the aggregator's EndpointServiceResolver, which reads
EndpointSlices since kubernetes#129837):

- the Service must exist (`service "<name>" not found`); its type must be ClusterIP (the
  default), NodePort or LoadBalancer: an ExternalName service is refused (`unsupported service
  type "ExternalName"`), as endpoint routing refuses it; it must have a port whose `port` is the
  one asked for (`no service port 443 found for service "<name>"`);
- its EndpointSlices are those labelled `kubernetes.io/service-name=<name>` in its namespace,
  the slices of the service's primary IP family (`spec.ipFamilies[0]`) first, each group in a
  random order; in each, the slice port whose name is the service port's name (the endpoints
  controller already resolved the service port's targetPort, a number or a named container
  port, into that port's number), and from a random starting point the first endpoint whose
  `conditions.ready` is true or absent, its first address;
- none: `no endpoints available for service "<name>"`.

A slice port without a name counts as named "": kube's controller writes `name: ""` for an
unnamed service port, raftkube's leaves the field out.

The callers verify TLS against the service's DNS name (`<name>.<namespace>.svc`), not the
address dialled: kube's webhook client and aggregator both set that ServerName.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable

from machinery.objects import Obj, as_dict

ROUTABLE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"

# (namespace, name) -> the Service, or None
ServiceLookup = Callable[[str, str], Awaitable[Obj | None]]
# namespace -> the EndpointSlices of that namespace (the resolver picks the service's by label)
SliceLookup = Callable[[str], Iterable[Obj]]


class NoRoute(Exception):
    """Why a service reference has no address, in kube's words (callers show str(e) as is)."""


def server_name(namespace: str, name: str) -> str:
    """The TLS server name kube verifies a service's certificate against."""
    return f"{name}.{namespace}.svc"


def host_port(host: str, port: int) -> str:
    """Go's net.JoinHostPort: an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _service_port(service: Obj, name: str, port: int) -> Obj:
    for candidate in as_dict(service.get("spec")).get("ports") or []:
        candidate = as_dict(candidate)
        if candidate.get("port") == port:
            return candidate
    raise NoRoute(f'no service port {port} found for service "{name}"')


def slices_of(name: str, slices: Iterable[Obj]) -> list[Obj]:
    """The EndpointSlices of service `name` among one namespace's slices."""
    return [s for s in slices if as_dict(as_dict(s.get("metadata")).get("labels")).get(SERVICE_NAME_LABEL) == name]


def _ordered(service: Obj, slices: list[Obj], rng: random.Random) -> list[Obj]:
    """The slices in a random order, those of the service's primary IP family first."""
    families = as_dict(service.get("spec")).get("ipFamilies") or []
    shuffled = rng.sample(slices, len(slices))
    if len(slices) < 2 or not families:
        return shuffled
    return sorted(shuffled, key=lambda s: s.get("addressType") != families[0])


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def route(service: Obj | None, slices: list[Obj], name: str, port: int, rng: random.Random) -> str:
    """`host:port` of one ready endpoint of the service's `port`, or NoRoute saying why there is none."""
    if service is None:
        raise NoRoute(f'service "{name}" not found')
    kind = as_dict(service.get("spec")).get("type") or "ClusterIP"
    if kind not in ROUTABLE_TYPES:
        raise NoRoute(f'unsupported service type "{kind}"')
    port_name = _service_port(service, name, port).get("name") or ""
    for slice_ in _ordered(service, slices, rng):
        endpoints = [as_dict(e) for e in slice_.get("endpoints") or []]
        for p in slice_.get("ports") or []:
            p = as_dict(p)
            if (p.get("name") or "") != port_name or not _is_int(p.get("port")) or not endpoints:
                continue
            offset = rng.randrange(len(endpoints))
            for i in range(len(endpoints)):
                endpoint = endpoints[(i + offset) % len(endpoints)]
                addresses = endpoint.get("addresses") or []
                if as_dict(endpoint.get("conditions")).get("ready") is not False and addresses:
                    return host_port(str(addresses[0]), p["port"])
    raise NoRoute(f'no endpoints available for service "{name}"')


class EndpointServiceResolver:
    """Resolves a service reference through the Services and EndpointSlices the lookups give
    (the watch caches)."""

    def __init__(self, services: ServiceLookup, slices: SliceLookup, rng: random.Random | None = None) -> None:
        self._services = services
        self._slices = slices
        self._rng = rng or random.Random()

    async def resolve(self, namespace: str, name: str, port: int) -> str:
        """`host:port` of one ready endpoint of the service's `port`; NoRoute when there is none."""
        service = await self._services(namespace, name)
        slices = slices_of(name, self._slices(namespace)) if service is not None else []
        return route(service, slices, name, port, self._rng)
