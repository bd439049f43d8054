"""Service cluster IPs and node ports (apiserver/service_allocation.py, service_ips.py,
node_ports.py) over real registries, watch caches and in-memory storage: what a create, an
update, a delete and a failed write take and give back, kube's errors for what cannot be had,
and the repair loop."""

from __future__ import annotations

import asyncio
import copy
import ipaddress
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.errors import StatusError
from apiserver.node_ports import KEY, NodePortAllocator, parse_range
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.generic import Registry
from apiserver.service_allocation import ServiceAllocation, ServiceAllocationRepair
from apiserver.service_ips import ClusterIPAllocator
from apiserver.watchcache.cacher import Cacher
from machinery.allocation_bands import NODE_PORT_BANDS, SERVICE_IP_BANDS, dynamic_offset
from machinery.objects import Obj
from tests.apiserver.kinds_support import find, registry
from tests.apiserver.memstorage import MemStorage

SERVICES = find("", "services")
ADDRESSES = find("networking.k8s.io", "ipaddresses")
FAMILIES = ["IPv4", "IPv6", "None"]
NODE_PORTS = st.integers(-1, 70000)


@dataclass
class World:
    storage: MemStorage
    services: Registry
    addresses: Registry
    address_cache: Cacher
    service_cache: Cacher
    allocation: ServiceAllocation
    repair: ServiceAllocationRepair

    async def create(self, svc: Obj, dry_run: bool = False) -> Obj:
        return await self.services.create("default", copy.deepcopy(svc), dry_run=dry_run)

    async def update(self, name: str, change: Any) -> Obj:
        def mutate(old: Obj | None) -> Obj:
            assert old is not None
            change(old)
            return old

        return (await self.services.mutate("default", name, mutate))[0]

    async def delete(self, name: str) -> None:
        await self.services.delete("default", name, DeleteOptions())

    async def ips(self) -> dict[str, str]:
        """IPAddress name -> the Service holding it."""
        out = {}
        for obj in await self.addresses.list_all(None):
            ref = obj["spec"]["parentRef"]
            out[obj["metadata"]["name"]] = f"{ref['namespace']}/{ref['name']}"
        return out

    async def settle(self) -> None:
        for _ in range(100):
            rev = self.storage.revision
            if self.address_cache.revision >= rev - 1 and self.service_cache.revision >= rev - 1:
                return
            await asyncio.sleep(0.01)


@asynccontextmanager
async def world(cidr: str = "10.96.0.0/16", ports: tuple[int, int] = (30000, 32767)) -> AsyncIterator[World]:
    storage = MemStorage()
    services, addresses = registry(SERVICES, storage), registry(ADDRESSES, storage)
    address_cache, service_cache = Cacher(storage, ADDRESSES), Cacher(storage, SERVICES)
    await address_cache.start()
    await service_cache.start()
    allocation = ServiceAllocation(
        ClusterIPAllocator(cidr, addresses, address_cache, random.Random(7)),
        NodePortAllocator(storage, ports, random.Random(7)),
    )
    services.write_hooks = allocation
    services.after_delete.append(allocation.released)
    repair = ServiceAllocationRepair(allocation, service_cache, addresses, address_cache)
    try:
        yield World(storage, services, addresses, address_cache, service_cache, allocation, repair)
    finally:
        await address_cache.stop()
        await service_cache.stop()


def service(name: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec},
    }


def causes(err: StatusError) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in err.details["causes"]]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_service_gets_a_free_address_from_the_upper_part_and_its_ipaddress_object() -> None:
    async def go() -> None:
        async with world() as w:
            svc = await w.create(service("web"))
            ip = svc["spec"]["clusterIP"]
            assert svc["spec"]["clusterIPs"] == [ip]
            assert svc["spec"]["ipFamilies"] == ["IPv4"] and svc["spec"]["ipFamilyPolicy"] == "SingleStack"
            upper_band = int(ipaddress.ip_address("10.96.0.1")) + dynamic_offset(65534, SERVICE_IP_BANDS)
            assert int(ipaddress.ip_address(ip)) >= upper_band
            assert await w.ips() == {ip: "default/web"}
            obj = await w.addresses.get(None, ip)
            assert obj["metadata"]["labels"] == {
                "ipaddress.kubernetes.io/ip-family": "IPv4",
                "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
            }
            assert obj["spec"]["parentRef"] == {
                "group": "",
                "resource": "services",
                "namespace": "default",
                "name": "web",
            }

    run(go())


def test_an_asked_for_address_is_taken_once_and_kubes_errors_name_the_field() -> None:
    async def go() -> None:
        async with world() as w:
            await w.create(service("a", clusterIP="10.96.0.10"))
            with pytest.raises(StatusError) as err:
                await w.create(service("b", clusterIP="10.96.0.10"))
            assert err.value.code == 422
            assert causes(err.value) == [
                'spec.clusterIPs: Invalid value: ["10.96.0.10"]: failed to allocate IP 10.96.0.10: '
                "provided IP is already allocated"
            ]
            with pytest.raises(StatusError) as err:
                await w.create(service("c", clusterIP="10.97.0.1"))
            assert causes(err.value) == [
                'spec.clusterIPs: Invalid value: ["10.97.0.1"]: failed to allocate IP 10.97.0.1: the provided IP '
                "(10.97.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/16"
            ]
            with pytest.raises(StatusError) as err:
                await w.create(service("d", clusterIP="10.96.0.0"))  # the network address is never handed out
            assert "not in the valid range" in causes(err.value)[0]
            for bad, want in (
                ({"ipFamilies": ["IPv6"]}, 'spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster'),
                (
                    {"ipFamilies": ["IPv4", "IPv5"]},
                    'spec.ipFamilies[1]: Unsupported value: "IPv5": supported values: "IPv4", "IPv6"',
                ),
                (
                    {"ipFamilyPolicy": "RequireDualStack"},
                    'spec.ipFamilyPolicy: Invalid value: "RequireDualStack": '
                    "this cluster is not configured for dual-stack services",
                ),
                ({"clusterIP": "10.96.0.300"}, 'spec.clusterIPs[0]: Invalid value: "10.96.0.300": must be a valid IP'),
                (
                    {"clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.21"]},
                    'spec.clusterIPs: Invalid value: ["10.96.0.21"]: first value must match `clusterIP`',
                ),
            ):
                with pytest.raises(StatusError) as err:
                    await w.create(service("e", **bad))
                assert err.value.code == 422 and any(c.startswith(want) for c in causes(err.value)), causes(err.value)
            assert await w.ips() == {"10.96.0.10": "default/a"}  # nothing refused kept an address

    run(go())


def test_headless_and_external_name_take_no_address() -> None:
    async def go() -> None:
        async with world() as w:
            headless = await w.create(service("h", clusterIP="None"))
            assert headless["spec"]["clusterIPs"] == ["None"] and headless["spec"]["ipFamilies"] == ["IPv4"]
            bare = await w.create({"metadata": {"name": "bare"}, "spec": {"clusterIP": "None"}})
            # kube: a headless Service without selector is RequireDualStack, with every family
            assert bare["spec"]["ipFamilyPolicy"] == "RequireDualStack"
            assert bare["spec"]["ipFamilies"] == ["IPv4", "IPv6"]
            ext = await w.create({"metadata": {"name": "x"}, "spec": {"type": "ExternalName", "externalName": "a.b"}})
            assert "clusterIP" not in ext["spec"] and "ipFamilies" not in ext["spec"]
            assert await w.ips() == {}

    run(go())


def test_type_changes_take_and_give_back() -> None:
    async def go() -> None:
        async with world() as w:
            svc = await w.create(service("web", type="NodePort"))
            ip, node_port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]
            assert 30000 + 86 <= node_port <= 32767  # the upper part first
            assert await w.allocation.ports.taken() == {node_port}

            def to_external(o: Obj) -> None:
                o["spec"]["type"] = "ExternalName"
                o["spec"]["externalName"] = "example.com"

            after = await w.update("web", to_external)
            assert "clusterIP" not in after["spec"] and "nodePort" not in after["spec"]["ports"][0]
            assert await w.ips() == {} and await w.allocation.ports.taken() == set()

            def to_cluster_ip(o: Obj) -> None:
                o["spec"]["type"] = "ClusterIP"
                o["spec"].pop("externalName")

            again = await w.update("web", to_cluster_ip)
            assert again["spec"]["clusterIP"] and await w.ips() == {again["spec"]["clusterIP"]: "default/web"}

            def to_node_port(o: Obj) -> None:
                o["spec"]["type"] = "NodePort"
                o["spec"]["ports"][0]["nodePort"] = 30007

            assert (await w.update("web", to_node_port))["spec"]["ports"][0]["nodePort"] == 30007
            assert await w.allocation.ports.taken() == {30007}

            def to_plain(o: Obj) -> None:
                o["spec"]["type"] = "ClusterIP"

            plain = await w.update("web", to_plain)
            assert "nodePort" not in plain["spec"]["ports"][0] and await w.allocation.ports.taken() == set()

            def move(o: Obj) -> None:
                o["spec"]["clusterIP"] = o["spec"]["clusterIPs"][0] = "10.96.0.99"

            with pytest.raises(StatusError) as err:
                await w.update("web", move)
            assert "may not change once set" in causes(err.value)[0]
            await w.delete("web")
            assert await w.ips() == {} and ip

    run(go())


def test_node_ports_kubes_errors_and_a_failed_write_gives_back() -> None:
    async def go() -> None:
        async with world() as w:
            await w.create(service("a", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
            with pytest.raises(StatusError) as err:
                await w.create(service("b", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
            assert causes(err.value) == [
                "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
            ]
            with pytest.raises(StatusError) as err:
                await w.create(service("c", type="NodePort", ports=[{"port": 80, "nodePort": 80}]))
            assert causes(err.value) == [
                "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. "
                "The range of valid ports is 30000-32767"
            ]
            two = [{"name": "a", "port": 80, "nodePort": 30090}, {"name": "b", "port": 81, "nodePort": 30090}]
            with pytest.raises(StatusError) as err:
                await w.create(service("d", type="NodePort", ports=two))
            assert causes(err.value) == ["spec.ports[1].nodePort: Duplicate value: 30090"]
            with pytest.raises(StatusError) as err:
                await w.create(service("e", ports=[{"port": 80, "nodePort": 30091}]))
            assert causes(err.value) == [
                "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"
            ]
            # the same number for TCP and UDP is one node port
            both = [
                {"name": "t", "port": 53, "protocol": "TCP", "nodePort": 30053},
                {"name": "u", "port": 53, "protocol": "UDP", "nodePort": 30053},
            ]
            await w.create(service("dns", type="NodePort", ports=both))
            # a create that loses at the store gives back what it took
            taken_before, ips_before = await w.allocation.ports.taken(), await w.ips()
            with pytest.raises(StatusError) as err:
                await w.create(service("a", type="NodePort"))
            assert err.value.code == 409
            assert await w.allocation.ports.taken() == taken_before and await w.ips() == ips_before
            dry = await w.create(service("f", type="NodePort"), dry_run=True)
            assert dry["spec"]["clusterIP"] and dry["spec"]["ports"][0]["nodePort"]
            assert await w.allocation.ports.taken() == taken_before and await w.ips() == ips_before

    run(go())


def test_repair_brings_back_missing_records_and_frees_orphans_after_a_grace() -> None:
    async def go() -> None:
        async with world() as w:
            svc = await w.create(service("web", type="NodePort"))
            ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]
            # lose both records, as a crash between writes could
            await w.addresses.delete(None, ip, DeleteOptions())
            await w.storage.delete(KEY)
            # and leave an orphan address and a leaked port
            await w.addresses.create(
                None,
                {
                    "metadata": {
                        "name": "10.96.5.5",
                        "labels": {"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"},
                    },
                    "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "x", "name": "gone"}},
                },
            )
            await w.allocation.ports.take([31999], 0)
            await w.settle()
            await w.repair.repair_once()
            assert await w.ips() == {ip: "default/web", "10.96.5.5": "x/gone"}  # an orphan gets a grace round
            assert await w.allocation.ports.taken() == {port, 31999}
            for _ in range(2):
                await w.settle()
                await w.repair.repair_once()
            assert await w.ips() == {ip: "default/web"}
            assert await w.allocation.ports.taken() == {port}

    run(go())


@pytest.mark.parametrize(
    "stored",
    [
        b"not json",
        b"[1, 2]",
        b'{"range": "30000-32767", "data": "%%%"}',
        b'{"range": "1-99999", "data": ""}',
    ],
)
def test_a_corrupted_node_port_bitmap_is_rewritten_and_repaired(stored: bytes) -> None:
    async def go() -> None:
        async with world() as w:
            svc = await w.create(service("web", type="NodePort"))
            port = svc["spec"]["ports"][0]["nodePort"]
            current = await w.storage.get(KEY)
            assert current is not None
            await w.storage.update(KEY, stored, current.revision)
            # writes go on (the bitmap reads as empty and is replaced) ...
            other = await w.create(service("api", type="NodePort"))
            assert await w.allocation.ports.taken() == {other["spec"]["ports"][0]["nodePort"]}
            # ... and the repair loop marks the first Service's port again
            await w.settle()
            await w.repair.repair_once()
            assert await w.allocation.ports.taken() == {port, other["spec"]["ports"][0]["nodePort"]}

    run(go())


def test_a_bitmap_with_more_bits_than_its_range_is_read_no_further() -> None:
    allocator = NodePortAllocator(MemStorage())
    huge = b'{"range": "30000-32767", "data": "' + b"/" * 4_000_000 + b'"}'
    assert allocator._decode(huge) == set(range(30000, 32768))


def test_the_random_bands_split_where_kube_splits() -> None:
    # kube's calculateRangeOffset: the service CIDR /16 (65,534 addresses) and /28 (14: no split);
    # the default node port range (2,768 ports) and a wide one
    assert dynamic_offset(65534, SERVICE_IP_BANDS) == 256 and dynamic_offset(14, SERVICE_IP_BANDS) == 0
    assert dynamic_offset(254, SERVICE_IP_BANDS) == 16 and dynamic_offset(2000, SERVICE_IP_BANDS) == 125
    assert dynamic_offset(2768, NODE_PORT_BANDS) == 86 and dynamic_offset(60000, NODE_PORT_BANDS) == 128


def test_port_range_flag_parsing() -> None:
    assert parse_range("30000-32767") == (30000, 32767) and parse_range("31000") == (31000, 31000)
    for bad in ("", "a-b", "0-10", "20-10", "1-70000"):
        with pytest.raises(ValueError):
            parse_range(bad)


@settings(max_examples=60, deadline=None)
@given(
    spec=st.dictionaries(
        st.sampled_from(["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "type", "ports", "selector"]),
        st.one_of(
            st.none(),
            st.text(max_size=12),
            st.integers(-5, 70000),
            st.lists(
                st.one_of(st.text(max_size=8), st.integers(), st.sampled_from(["IPv4", "IPv6", "None"])), max_size=3
            ),
            st.sampled_from(["NodePort", "ClusterIP", "ExternalName", "None", "10.96.0.5", "SingleStack"]),
            st.lists(
                st.fixed_dictionaries({"port": st.integers(0, 70000), "nodePort": st.integers(-1, 70000)}), max_size=3
            ),
        ),
        max_size=5,
    )
)
def test_hostile_specs_get_a_status_and_never_leak(spec: dict[str, Any]) -> None:
    """Whatever the spec, a create answers with the Service or a Status; a refused one keeps no
    address and no port."""

    async def go() -> None:
        async with world(ports=(30000, 30100)) as w:
            try:
                svc = await w.create({"metadata": {"name": "s"}, "spec": copy.deepcopy(spec)})
            except StatusError:
                assert await w.ips() == {} and await w.allocation.ports.taken() == set()
                return
            held = await w.ips()
            assert set(held) == {ip for ip in svc["spec"].get("clusterIPs", []) if ip != "None"}

    run(go())
