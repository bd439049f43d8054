"""A service reference -> a ready endpoint's address (apiserver.service_routing), by kube's
proxy.ResolveEndpoint rules: the service port by number, the endpoints' port by the service
port's name, ready addresses only, kube's words for every dead end."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from apiserver.service_routing import EndpointServiceResolver, NoRoute, addresses, pick, server_name
from machinery.objects import Obj


def service(*ports: Obj, kind: str | None = None) -> Obj:
    spec: Obj = {"ports": list(ports)}
    if kind is not None:
        spec["type"] = kind
    return {"metadata": {"namespace": "ns", "name": "hook"}, "spec": spec}


def endpoints(*subsets: Obj) -> Obj:
    return {"metadata": {"namespace": "ns", "name": "hook"}, "subsets": list(subsets)}


def subset(ready: Sequence[str], ports: Sequence[Obj], not_ready: Sequence[str] = ()) -> Obj:
    out: Obj = {"ports": list(ports)}
    if ready:
        out["addresses"] = [{"ip": ip} for ip in ready]
    if not_ready:
        out["notReadyAddresses"] = [{"ip": ip} for ip in not_ready]
    return out


def test_the_service_port_is_found_by_number_and_an_unnamed_port_pairs_with_the_unnamed_endpoint_port() -> None:
    svc = service({"port": 443, "targetPort": 8444})
    eps = endpoints(subset(["10.0.0.1"], [{"port": 8444, "protocol": "TCP"}]))
    assert addresses(svc, eps, "hook", 443) == [("10.0.0.1", 8444)]
    with pytest.raises(NoRoute, match=r'^no service port 8443 found for service "hook"$'):
        addresses(svc, eps, "hook", 8443)


def test_a_named_service_port_takes_the_endpoint_port_of_its_name() -> None:
    """Two ports: the one asked for by number, its targetPort (a container port's name) already
    resolved by the endpoints controller into the endpoint port carrying the service port's name."""
    svc = service(
        {"name": "metrics", "port": 9090, "targetPort": 9091},
        {"name": "https", "port": 443, "targetPort": "webhook-api"},
    )
    eps = endpoints(
        subset(["10.0.0.1", "10.0.0.2"], [{"name": "metrics", "port": 9091}, {"name": "https", "port": 8444}])
    )
    assert addresses(svc, eps, "hook", 443) == [("10.0.0.1", 8444), ("10.0.0.2", 8444)]
    assert addresses(svc, eps, "hook", 9090) == [("10.0.0.1", 9091), ("10.0.0.2", 9091)]


def test_not_ready_addresses_are_never_chosen() -> None:
    svc = service({"port": 443, "targetPort": 8444})
    eps = endpoints(
        subset([], [{"port": 8444}], not_ready=["10.0.0.9"]),
        subset(["10.0.0.1"], [{"port": 8444}], not_ready=["10.0.0.8"]),
    )
    assert addresses(svc, eps, "hook", 443) == [("10.0.0.1", 8444)]
    only_unready = endpoints(subset([], [{"port": 8444}], not_ready=["10.0.0.9"]))
    with pytest.raises(NoRoute, match=r'^no endpoints available for service "hook"$'):
        addresses(svc, only_unready, "hook", 443)


def test_a_service_without_endpoints_is_refused_in_kubes_words() -> None:
    svc = service({"port": 443})
    with pytest.raises(NoRoute, match=r'^endpoints "hook" not found$'):
        addresses(svc, None, "hook", 443)
    with pytest.raises(NoRoute, match=r'^no endpoints available for service "hook"$'):
        addresses(svc, endpoints(), "hook", 443)
    with pytest.raises(NoRoute, match=r'^no endpoints available for service "hook"$'):  # no port of that name
        addresses(svc, endpoints(subset(["10.0.0.1"], [{"name": "other", "port": 1}])), "hook", 443)
    with pytest.raises(NoRoute, match=r'^service "hook" not found$'):
        addresses(None, None, "hook", 443)


def test_only_cluster_ip_node_port_and_load_balancer_services_are_routed() -> None:
    eps = endpoints(subset(["10.0.0.1"], [{"port": 443}]))
    for kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        assert addresses(service({"port": 443}, kind=kind), eps, "hook", 443) == [("10.0.0.1", 443)]
    with pytest.raises(NoRoute, match=r'^unsupported service type "ExternalName"$'):
        addresses(service({"port": 443}, kind="ExternalName"), eps, "hook", 443)


def test_the_address_is_joined_as_go_joins_it_and_the_tls_name_is_the_services_dns_name() -> None:
    first = lambda found: found[0]  # noqa: E731
    assert pick([("fd00::1", 8444)], first) == "[fd00::1]:8444"
    assert pick([("127.0.0.1", 8444)], first) == "127.0.0.1:8444"
    assert server_name("webhook-902", "e2e-test-webhook") == "e2e-test-webhook.webhook-902.svc"


def test_the_resolver_reads_the_service_and_its_endpoints_of_that_namespace() -> None:
    objects: dict[tuple[str, str, str], Obj] = {
        ("services", "ns", "hook"): service({"port": 443, "targetPort": 8444}),
        ("endpoints", "ns", "hook"): endpoints(subset(["127.0.0.1"], [{"port": 8444}])),
    }
    asked: list[Any] = []

    async def lookup(plural: str, namespace: str, name: str) -> Obj | None:
        asked.append((plural, namespace, name))
        return objects.get((plural, namespace, name))

    resolver = EndpointServiceResolver(lookup)
    assert asyncio.run(resolver.resolve("ns", "hook", 443)) == "127.0.0.1:8444"
    assert asked == [("services", "ns", "hook"), ("endpoints", "ns", "hook")]
    with pytest.raises(NoRoute, match=r'^service "hook" not found$'):
        asyncio.run(resolver.resolve("other", "hook", 443))
