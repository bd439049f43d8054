"""What a Service write takes and gives back: its cluster IPs and node ports (kube's
pkg/registry/core/service/storage/alloc.go), and the repair loops that keep the records true.

A write (the services registry's WriteHooks): after validation the IP family fields are
filled in as kube's initIPFamilyFields does (policy SingleStack, or RequireDualStack for a
headless Service without selector; families from the cluster's one range), a cluster IP is
taken (the one asked for, or a free one) unless the Service is headless or ExternalName, node
ports likewise for NodePort and LoadBalancer Services; what the old object held and the new
one does not is given back once the write is stored, what was taken is given back when it is
not (a Reservation).  A delete gives everything back (the registry's after-delete hook).

Repair (kube's repairip and portallocator repair controllers): every REPAIR_INTERVAL_S an
IPAddress is made for a Service's address that has none, an IPAddress of ours whose Service is
gone or holds another address is deleted after it was seen so twice (a create in flight has
its IPAddress before its Service), and the node port bitmap becomes what the Services hold (a
port no Service holds is freed after three rounds, for the same reason).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apiserver import errors
from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.node_ports import NodePortAllocator, PortAllocationError
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.generic import Registry, Reservation
from apiserver.resources.base import ResourceDef
from apiserver.service_ips import ALLOCATOR_NAME, MANAGED_BY_LABEL, AllocationError, ClusterIPAllocator, ParentRef
from apiserver.watchcache.cacher import Cacher
from machinery.objects import Obj

log = logging.getLogger("raftkube.apiserver")

NONE = "None"
NODE_PORT_TYPES = ("NodePort", "LoadBalancer")
REPAIR_INTERVAL_S = 10.0
ORPHAN_ROUNDS = 2  # rounds an IPAddress without its Service is seen before it goes
LEAK_ROUNDS = 3  # rounds a taken port no Service holds is seen before it is freed (kube: 3)
NOT_DUAL_STACK = "this cluster is not configured for dual-stack services"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _other(family: str) -> str:
    return "IPv6" if family == "IPv4" else "IPv4"


def _spec(svc: Obj | None) -> Obj:
    spec = svc.get("spec") if isinstance(svc, dict) else None
    return spec if isinstance(spec, dict) else {}


def cluster_ips(svc: Obj | None) -> list[str]:
    """The addresses a stored Service holds (none for headless and ExternalName ones)."""
    spec = _spec(svc)
    if spec.get("type") == "ExternalName":
        return []
    ips = spec.get("clusterIPs")
    return [ip for ip in ips if isinstance(ip, str) and ip and ip != NONE] if isinstance(ips, list) else []


def node_ports(svc: Obj | None) -> set[int]:
    spec = _spec(svc)
    if spec.get("type") not in NODE_PORT_TYPES:
        return set()
    ports = spec.get("ports")
    out = {p.get("nodePort") for p in ports if isinstance(p, dict)} if isinstance(ports, list) else set()
    health = spec.get("healthCheckNodePort")
    return {p for p in (*out, health) if v.is_int(p) and p > 0}


def _owner(svc: Obj) -> ParentRef:
    meta = svc.get("metadata") or {}
    return ParentRef(str(meta.get("namespace", "")), str(meta.get("name", "")))


@dataclass
class _Taken:
    """One write's reservation."""

    allocation: ServiceAllocation
    owner: ParentRef
    new_ips: list[str] = field(default_factory=list)  # taken by this write
    new_ports: list[int] = field(default_factory=list)
    old_ips: list[str] = field(default_factory=list)  # held before and not after: freed on commit
    old_ports: list[int] = field(default_factory=list)

    async def commit(self) -> None:
        await self.allocation.give_back(self.owner, self.old_ips, self.old_ports)

    async def revert(self) -> None:
        await self.allocation.give_back(self.owner, self.new_ips, self.new_ports)


class ServiceAllocation:
    """The services registry's WriteHooks, and its after-delete hook."""

    def __init__(self, ips: ClusterIPAllocator, ports: NodePortAllocator) -> None:
        self.ips = ips
        self.ports = ports

    def _invalid(self, svc: Obj, causes: list[Cause]) -> errors.StatusError:
        return errors.invalid("Service", str((svc.get("metadata") or {}).get("name", "")), causes)

    def _families(self, svc: Obj, old: Obj | None) -> bool:
        """kube's initIPFamilyFields for a single-family cluster; whether there is an address
        to allocate (False: headless)."""
        spec = _spec(svc)
        family = self.ips.family
        ips = _list(spec.get("clusterIPs"))
        headless = ips[:1] == [NONE]
        selectorless = not spec.get("selector")
        if spec.get("ipFamilyPolicy") is None:
            before = _spec(old).get("ipFamilyPolicy")
            if before is not None:
                spec["ipFamilyPolicy"] = before
            elif headless and selectorless:
                spec["ipFamilyPolicy"] = "RequireDualStack"
            else:
                spec["ipFamilyPolicy"] = "SingleStack"
        policy = spec["ipFamilyPolicy"]
        families = _list(spec.get("ipFamilies"))
        causes: list[Cause] = []
        if policy == "SingleStack":
            if len(ips) == 2:
                causes.append(
                    v.invalid(
                        "spec.ipFamilyPolicy",
                        policy,
                        "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
                    )
                )
            if len(families) == 2:
                causes.append(
                    v.invalid(
                        "spec.ipFamilyPolicy",
                        policy,
                        "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
                    )
                )
        for i, ip in enumerate(ips):
            if ip == NONE:
                break
            ip_family = "IPv6" if ":" in str(ip) else "IPv4"
            if i >= len(families):
                if ip_family != family:
                    causes.append(
                        v.invalid(v.index("spec.clusterIPs", i), ips, f"{ip_family} is not configured on this cluster")
                    )
                else:
                    families = [*families, ip_family]
        if causes:
            raise self._invalid(svc, causes)
        if headless and selectorless:
            families = families or [family]
            if len(families) < 2 and policy != "SingleStack":
                families = [*families, _other(families[0])]
            spec["ipFamilies"] = families
            return False
        if policy == "RequireDualStack":
            causes.append(
                v.invalid("spec.ipFamilyPolicy", policy, "this cluster is not configured for dual-stack services")
            )
        for i, f in enumerate(families):
            if f != family:
                causes.append(v.invalid(v.index("spec.ipFamilies", i), f, "not configured on this cluster"))
        if causes:
            raise self._invalid(svc, causes)
        spec["ipFamilies"] = families or [family]
        return not headless

    async def reserve(self, new: Obj, old: Obj | None, dry_run: bool) -> Reservation:
        spec = _spec(new)
        owner = _owner(new)
        taken = _Taken(self, owner)
        kind = spec.get("type")
        held_ips, held_ports = cluster_ips(old), node_ports(old)
        try:
            if kind != "ExternalName" and self._families(new, old):
                await self._take_ip(new, spec, owner, held_ips, taken, dry_run)
            if kind in NODE_PORT_TYPES:
                await self._take_ports(new, spec, held_ports, taken, dry_run)
        except BaseException:
            if not dry_run:
                await taken.revert()
            raise
        if dry_run:
            taken.new_ips, taken.new_ports = [], []  # a dry run kept nothing
        taken.old_ips = [ip for ip in held_ips if ip not in cluster_ips(new)]
        taken.old_ports = sorted(held_ports - node_ports(new))
        return taken

    async def _take_ip(
        self, svc: Obj, spec: Obj, owner: ParentRef, held: list[str], taken: _Taken, dry_run: bool
    ) -> None:
        asked = spec.get("clusterIP")
        if not asked:
            ip = await self._allocate(svc, lambda: self.ips.allocate_next(owner, dry_run), "")
            taken.new_ips.append(ip)
            spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
            return
        if asked in held:
            return
        if await self._allocate(svc, lambda: self._static(asked, owner, dry_run), asked):
            taken.new_ips.append(asked)

    async def _static(self, ip: str, owner: ParentRef, dry_run: bool) -> str:
        return ip if await self.ips.allocate(ip, owner, dry_run) else ""

    async def _allocate(self, svc: Obj, allocate: Callable[[], Any], asked: str) -> Any:
        try:
            return await allocate()
        except AllocationError as e:
            if not asked:
                raise errors.internal(f"failed to allocate a serviceIP: {e}") from None
            ips = _spec(svc).get("clusterIPs")
            raise self._invalid(
                svc, [v.invalid("spec.clusterIPs", ips, f"failed to allocate IP {asked}: {e}")]
            ) from None

    async def _take_ports(self, svc: Obj, spec: Obj, held: set[int], taken: _Taken, dry_run: bool) -> None:
        ports = _list(spec.get("ports"))
        wanted: list[int] = []
        missing: list[dict[str, Any]] = []
        asked_at: dict[int, int] = {}
        auto = spec.get("type") == "NodePort" or spec.get("allocateLoadBalancerNodePorts", True) is not False
        for i, port in enumerate(ports):
            if not isinstance(port, dict):
                continue
            node_port = port.get("nodePort")
            if v.is_int(node_port) and node_port > 0:
                if node_port not in held and node_port not in wanted:
                    wanted.append(node_port)
                    asked_at[node_port] = i
            elif auto:
                missing.append(port)
        for node_port in wanted:
            if not self.ports.contains(node_port):
                here = v.child(v.index("spec.ports", asked_at[node_port]), "nodePort")
                raise self._invalid(
                    svc,
                    [
                        v.invalid(
                            here,
                            node_port,
                            "provided port is not in the valid range. The range of valid ports is "
                            + self.ports.range_text,
                        )
                    ],
                )
        # a port number given to several ports (TCP and UDP) is one node port
        try:
            if wanted:
                await self.ports.take(wanted, 0, dry_run)
                if not dry_run:
                    taken.new_ports.extend(wanted)
        except PortAllocationError as e:
            first = await self._first_taken(wanted)
            here = v.child(v.index("spec.ports", asked_at.get(first, 0)), "nodePort")
            raise self._invalid(svc, [v.invalid(here, first, str(e))]) from None
        if missing:
            try:
                picked = await self.ports.take([], len(missing), dry_run)
            except PortAllocationError as e:
                raise errors.internal(f"failed to allocate a nodePort: {e}") from None
            if not dry_run:
                taken.new_ports.extend(picked)
            for port, number in zip(missing, picked, strict=True):
                port["nodePort"] = number

    async def _first_taken(self, wanted: list[int]) -> int:
        with contextlib.suppress(Exception):
            now = await self.ports.taken()
            for port in wanted:
                if port in now:
                    return port
        return wanted[0]

    async def give_back(self, owner: ParentRef, ips: list[str], ports: list[int]) -> None:
        for ip in ips:
            await self.ips.release(ip, owner)
        if ports:
            try:
                await self.ports.give_back(ports)
            except Exception as e:  # the repair loop frees what is left
                log.warning("node ports %s of %s/%s not released: %r", ports, owner.namespace, owner.name, e)

    async def released(self, resource: ResourceDef, svc: Obj) -> None:
        """After a Service is deleted: everything it held goes back."""
        await self.give_back(_owner(svc), cluster_ips(svc), sorted(node_ports(svc)))


class ServiceAllocationRepair:
    """kube's repair controllers for both records."""

    def __init__(
        self,
        allocation: ServiceAllocation,
        services: Cacher,
        addresses: Registry,
        address_cache: Cacher,
    ) -> None:
        self.allocation = allocation
        self.services = services
        self.addresses = addresses
        self.address_cache = address_cache
        self._orphans: dict[str, int] = {}
        self._leaks: dict[int, int] = {}

    def _held(self) -> tuple[dict[str, ParentRef], set[int]]:
        ips: dict[str, ParentRef] = {}
        ports: set[int] = set()
        for svc in self.services.objects():
            owner = _owner(svc)
            for ip in cluster_ips(svc):
                if self.allocation.ips.contains(ip):
                    ips[ip] = owner
            ports |= node_ports(svc)
        return ips, ports

    async def repair_once(self) -> None:
        held_ips, held_ports = self._held()
        await self._repair_ips(held_ips)
        await self._repair_ports(held_ports)

    async def _repair_ips(self, held: dict[str, ParentRef]) -> None:
        ips = self.allocation.ips
        for ip, owner in held.items():
            found = self.address_cache.get_object(None, ip)
            if found is None:
                with contextlib.suppress(AllocationError):
                    if await ips.allocate(ip, owner):
                        log.warning(
                            "cluster IP %s of %s/%s had no IPAddress: repaired", ip, owner.namespace, owner.name
                        )
            elif ParentRef.of(found) != owner:
                log.warning("cluster IP %s of %s/%s is held by another object", ip, owner.namespace, owner.name)
        seen: dict[str, int] = {}
        for obj in list(self.address_cache.objects()):
            name = str((obj.get("metadata") or {}).get("name", ""))
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if labels.get(MANAGED_BY_LABEL) != ALLOCATOR_NAME or held.get(name) == ParentRef.of(obj):
                continue
            rounds = self._orphans.get(name, 0) + 1
            if rounds < ORPHAN_ROUNDS:
                seen[name] = rounds
                continue
            log.warning("IPAddress %s has no Service holding it: deleted", name)
            with contextlib.suppress(errors.StatusError):
                await self.addresses.delete(None, name, DeleteOptions())
        self._orphans = seen

    async def _repair_ports(self, held: set[int]) -> None:
        ports = self.allocation.ports
        leaks: dict[int, int] = {}

        def edit(taken: set[int]) -> set[int]:
            leaks.clear()
            kept = {p for p in held if ports.contains(p)}
            for port in taken - kept:
                rounds = self._leaks.get(port, 0) + 1
                if rounds < LEAK_ROUNDS:
                    leaks[port] = rounds
                    kept.add(port)
            return kept

        await ports.change(edit)
        self._leaks = leaks

    async def run(self, interval: float = REPAIR_INTERVAL_S) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.repair_once()
            except Exception:  # the loop outlives any one round's surprise; it is logged
                log.exception("service allocation repair round failed")
