"""A service reference -> a ready endpoint's address (apiserver.service_routing), by v1.33's
proxy.ResolveEndpoint rules: the service port by number, the slices' port by the service
port's name, ready endpoints only, kube's words for every dead end."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable, Sequence

import pytest

from apiserver.service_routing import EndpointServiceResolver, NoRoute, host_port, route, server_name, slices_of
from machinery.objects import Obj


def service(*ports: Obj, kind: str | None = None, families: Sequence[str] = ()) -> Obj:
    spec: Obj = {"ports": list(ports)}
    if kind is not None:
        spec["type"] = kind
    if families:
        spec["ipFamilies"] = list(families)
    return {"metadata": {"namespace": "ns", "name": "hook"}, "spec": spec}


def endpoint(ip: str, ready: bool | None = True) -> Obj:
    return {"addresses": [ip], "conditions": {} if ready is None else {"ready": ready}}


def slice_(ports: Sequence[Obj], *endpoints: Obj, service: str = "hook", family: str = "IPv4") -> Obj:
    labels = {"kubernetes.io/service-name": service}
    meta = {"namespace": "ns", "name": f"{service}-x", "labels": labels}
    return {"metadata": meta, "addressType": family, "ports": list(ports), "endpoints": list(endpoints)}


def every(svc: Obj | None, slices: list[Obj], port: int) -> set[str]:
    """Every address route() may choose (its choices are random): over many seeds."""
    return {route(svc, slices, "hook", port, random.Random(seed)) for seed in range(64)}


def refused(svc: Obj | None, slices: list[Obj], port: int) -> str:
    with pytest.raises(NoRoute) as e:
        route(svc, slices, "hook", port, random.Random(0))
    return str(e.value)


def test_the_service_port_is_found_by_number_and_an_unnamed_port_pairs_with_the_unnamed_slice_port() -> None:
    svc = service({"port": 443, "targetPort": 8444})
    named_empty = [slice_([{"name": "", "port": 8444}], endpoint("10.0.0.1"))]  # as kube's controller writes it
    absent = [slice_([{"port": 8444}], endpoint("10.0.0.1"))]  # as raftkube's writes it
    assert every(svc, named_empty, 443) == every(svc, absent, 443) == {"10.0.0.1:8444"}
    assert refused(svc, absent, 8443) == 'no service port 8443 found for service "hook"'


def test_a_named_service_port_takes_the_slice_port_of_its_name() -> None:
    """Two ports: the one asked for by number, its targetPort (a container port's name) already
    resolved by the endpoints controller into the slice port carrying the service port's name."""
    svc = service(
        {"name": "metrics", "port": 9090, "targetPort": 9091},
        {"name": "https", "port": 443, "targetPort": "webhook-api"},
    )
    ports = [{"name": "metrics", "port": 9091}, {"name": "https", "port": 8444}]
    slices = [slice_(ports, endpoint("10.0.0.1"), endpoint("10.0.0.2"))]
    assert every(svc, slices, 443) == {"10.0.0.1:8444", "10.0.0.2:8444"}
    assert every(svc, slices, 9090) == {"10.0.0.1:9091", "10.0.0.2:9091"}


def test_not_ready_endpoints_are_never_chosen() -> None:
    svc = service({"port": 443, "targetPort": 8444})
    slices = [
        slice_([{"port": 8444}], endpoint("10.0.0.9", ready=False)),
        slice_([{"port": 8444}], endpoint("10.0.0.8", ready=False), endpoint("10.0.0.1"), endpoint("10.0.0.2", None)),
    ]
    assert every(svc, slices, 443) == {"10.0.0.1:8444", "10.0.0.2:8444"}  # ready absent counts as ready
    only_unready = [slice_([{"port": 8444}], endpoint("10.0.0.9", ready=False))]
    assert refused(svc, only_unready, 443) == 'no endpoints available for service "hook"'


def test_a_service_without_endpoints_is_refused_in_kubes_words() -> None:
    svc = service({"port": 443})
    assert refused(svc, [], 443) == 'no endpoints available for service "hook"'
    assert refused(svc, [slice_([{"port": 443}])], 443) == 'no endpoints available for service "hook"'
    no_such_port = [slice_([{"name": "other", "port": 1}], endpoint("10.0.0.1"))]
    assert refused(svc, no_such_port, 443) == 'no endpoints available for service "hook"'
    assert refused(None, [], 443) == 'service "hook" not found'


def test_only_cluster_ip_node_port_and_load_balancer_services_are_routed() -> None:
    slices = [slice_([{"port": 443}], endpoint("10.0.0.1"))]
    for kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        assert every(service({"port": 443}, kind=kind), slices, 443) == {"10.0.0.1:443"}
    assert (
        refused(service({"port": 443}, kind="ExternalName"), slices, 443) == 'unsupported service type "ExternalName"'
    )


def test_the_primary_ip_familys_slices_come_first() -> None:
    slices = [
        slice_([{"port": 443}], endpoint("fd00::1"), family="IPv6"),
        slice_([{"port": 443}], endpoint("10.0.0.1"), family="IPv4"),
    ]
    assert every(service({"port": 443}, families=["IPv6", "IPv4"]), slices, 443) == {"[fd00::1]:443"}
    assert every(service({"port": 443}, families=["IPv4", "IPv6"]), slices, 443) == {"10.0.0.1:443"}


def test_the_address_is_joined_as_go_joins_it_and_the_tls_name_is_the_services_dns_name() -> None:
    assert host_port("fd00::1", 8444) == "[fd00::1]:8444"
    assert host_port("127.0.0.1", 8444) == "127.0.0.1:8444"
    assert server_name("webhook-902", "e2e-test-webhook") == "e2e-test-webhook.webhook-902.svc"


def test_the_resolver_reads_the_service_and_only_its_own_slices_of_that_namespace() -> None:
    svc = service({"port": 443, "targetPort": 8444})
    mine = slice_([{"port": 8444}], endpoint("127.0.0.1"))
    other = slice_([{"port": 8444}], endpoint("10.9.9.9"), service="other")
    assert slices_of("hook", [mine, other]) == [mine]

    async def services(namespace: str, name: str) -> Obj | None:
        return svc if (namespace, name) == ("ns", "hook") else None

    def slices(namespace: str) -> Iterable[Obj]:
        return [mine, other] if namespace == "ns" else []

    resolver = EndpointServiceResolver(services, slices)
    assert {asyncio.run(resolver.resolve("ns", "hook", 443)) for _ in range(16)} == {"127.0.0.1:8444"}
    with pytest.raises(NoRoute, match=r'^service "hook" not found$'):
        asyncio.run(resolver.resolve("other", "hook", 443))
