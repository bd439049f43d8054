"""A Service reference (namespace, name, port) -> one ready endpoint's address, as kube-apiserver
routes to a webhook's or an APIService's service with `--enable-aggregator-routing=true`.

raftkube has no ClusterIPs and no service proxy: pods share their node's network, so the only
way to reach a Service from the apiserver is through its endpoints.  The rules are
k8s.io/apiserver's `proxy.ResolveEndpoint` (the aggregator's EndpointServiceResolver):

- the Service must exist (`service "<name>" not found`), and have a port whose `port` is the
  one asked for (`no service port 443 found for service "<name>"`);
- its type must be ClusterIP (the default), NodePort or LoadBalancer; an ExternalName service
  is refused (`unsupported service type "ExternalName"`), as endpoint routing refuses it;
- its Endpoints object must exist (`endpoints "<name>" not found`); from each subset only the
  ready `addresses` count (`notReadyAddresses` never), paired with the subset's port whose
  name is the service port's name: the endpoints controller already resolved the service
  port's targetPort (a number, or a named container port) into that port's number;
- none left: `no endpoints available for service "<name>"`; several: one at random, as kube
  spreads calls over the endpoints.

The callers verify TLS against the service's DNS name (`<name>.<namespace>.svc`), not the
address dialled: kube's webhook client and aggregator both set that ServerName.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from machinery.objects import Obj, as_dict

ROUTABLE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")

# (resource plural: "services" or "endpoints", namespace, name) -> the object or None
Lookup = Callable[[str, str, str], Awaitable[Obj | None]]


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


def addresses(service: Obj | None, endpoints: Obj | None, name: str, port: int) -> list[tuple[str, int]]:
    """Every ready (ip, port) the service's `port` reaches, or NoRoute saying why there is none."""
    if service is None:
        raise NoRoute(f'service "{name}" not found')
    wanted = _service_port(service, name, port)
    kind = as_dict(service.get("spec")).get("type") or "ClusterIP"
    if kind not in ROUTABLE_TYPES:
        raise NoRoute(f'unsupported service type "{kind}"')
    if endpoints is None:
        raise NoRoute(f'endpoints "{name}" not found')
    port_name = wanted.get("name") or ""
    found: list[tuple[str, int]] = []
    for subset in endpoints.get("subsets") or []:
        subset = as_dict(subset)
        ready = [a for a in (as_dict(a).get("ip") for a in subset.get("addresses") or []) if isinstance(a, str) and a]
        for p in subset.get("ports") or []:
            p = as_dict(p)
            number = p.get("port")
            if (p.get("name") or "") == port_name and isinstance(number, int) and not isinstance(number, bool):
                found.extend((ip, number) for ip in ready)
    if not found:
        raise NoRoute(f'no endpoints available for service "{name}"')
    return found


def pick(found: Sequence[tuple[str, int]], choose: Callable[[Sequence[Any]], Any] = random.choice) -> str:
    """One of the addresses as `host:port`."""
    ip, number = choose(found)
    return host_port(ip, number)


class EndpointServiceResolver:
    """Resolves a service reference through the objects `lookup` returns (the watch caches)."""

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup

    async def resolve(self, namespace: str, name: str, port: int) -> str:
        """`host:port` of one ready endpoint of the service's `port`; NoRoute when there is none."""
        service = await self._lookup("services", namespace, name)
        endpoints = await self._lookup("endpoints", namespace, name) if service is not None else None
        return pick(addresses(service, endpoints, name, port))
