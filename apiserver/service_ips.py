"""Service ClusterIPs, allocated as kube-apiserver 1.33 allocates them (MultiCIDRServiceAllocator,
GA): one networking.k8s.io/v1 IPAddress object per taken address, named by the address, whose
`spec.parentRef` names the Service that holds it.

The store is the arbiter: creating an IPAddress succeeds for exactly one writer, so two
apiservers (or two requests in one) can never hand out one address twice, and nothing but the
objects themselves has to survive a restart.  The watch cache of IPAddresses only steers the
search for a free address (a stale view costs a refused create and a next try).

Where a dynamic address comes from (KEP-3070, as kube): the range is split at an offset of
min(max(16, size/16), 256) addresses; dynamic allocations take a random address from the upper
part first and the lower part only when the upper is full, so the lower part stays for the
addresses users and add-ons pick (the `kubernetes` Service has the first, cluster DNS the tenth).
"""

from __future__ import annotations

import ipaddress
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass

from apiserver import errors
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.generic import Registry
from apiserver.watchcache.cacher import Cacher
from machinery.allocation_bands import SERVICE_IP_BANDS, dynamic_offset
from machinery.objects import Obj

log = logging.getLogger("raftkube.apiserver")

MANAGED_BY_LABEL = "ipaddress.kubernetes.io/managed-by"
FAMILY_LABEL = "ipaddress.kubernetes.io/ip-family"
ALLOCATOR_NAME = "ipallocator.k8s.io"  # kube's ControllerName: what marks the objects we own
MANAGER = "kube-apiserver"
MAX_CREATE_ATTEMPTS = 64  # refused creates (addresses taken meanwhile) before giving up as full


class AllocationError(Exception):
    """An address that cannot be had; the message is kube's words (ErrAllocated, ErrNotInRange, ErrFull)."""


@dataclass(frozen=True, slots=True)
class ParentRef:
    """The Service an address belongs to."""

    namespace: str
    name: str

    def as_object(self) -> Obj:
        return {"group": "", "resource": "services", "namespace": self.namespace, "name": self.name}

    @classmethod
    def of(cls, ip_object: Obj) -> ParentRef | None:
        ref = (ip_object.get("spec") or {}).get("parentRef")
        if not isinstance(ref, dict) or ref.get("resource") != "services" or ref.get("group", ""):
            return None
        namespace, name = ref.get("namespace"), ref.get("name")
        return cls(namespace, name) if isinstance(namespace, str) and isinstance(name, str) else None


class ClusterIPAllocator:
    """The addresses of one service CIDR (one IP family)."""

    def __init__(self, cidr: str, addresses: Registry, cache: Cacher | None, rng: random.Random | None = None) -> None:
        self.network = ipaddress.ip_network(cidr, strict=True)
        self.family = "IPv6" if self.network.version == 6 else "IPv4"
        self.addresses = addresses
        self.cache = cache
        self.rng = rng or random.Random()
        # the network address is never handed out; for IPv4 neither is the broadcast address
        self.first = int(self.network.network_address) + 1
        self.last = int(self.network.broadcast_address) - (1 if self.network.version == 4 else 0)
        self.size = max(0, self.last - self.first + 1)
        self.offset = dynamic_offset(self.size, SERVICE_IP_BANDS)

    @property
    def cidr(self) -> str:
        return str(self.network)

    def contains(self, ip: str) -> bool:
        try:
            value = int(ipaddress.ip_address(ip))
        except ValueError:
            return False
        return ipaddress.ip_address(ip).version == self.network.version and self.first <= value <= self.last

    def _taken_in_cache(self, ip: str) -> bool:
        return self.cache is not None and self.cache.get_object(None, ip) is not None

    def _object(self, ip: str, owner: ParentRef) -> Obj:
        return {
            "metadata": {"name": ip, "labels": {FAMILY_LABEL: self.family, MANAGED_BY_LABEL: ALLOCATOR_NAME}},
            "spec": {"parentRef": owner.as_object()},
        }

    async def _holder(self, ip: str) -> ParentRef | bool | None:
        """Who holds `ip` in the store: its ParentRef, False when nobody, None when something
        that is not a Service does."""
        try:
            found = await self.addresses.get(None, ip)
        except errors.StatusError as e:
            if e.code == 404:
                return False
            raise
        return ParentRef.of(found)

    async def allocate(self, ip: str, owner: ParentRef, dry_run: bool = False) -> bool:
        """Take `ip` for `owner`.  True when taken now, False when `owner` held it already (a
        retried write, a repaired object); AllocationError when it is not to be had."""
        if not self.contains(ip):
            raise AllocationError(
                f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is {self.cidr}"
            )
        if dry_run:
            holder = await self._holder(ip)
            if holder is not False and holder != owner:
                raise AllocationError("provided IP is already allocated")
            return False
        try:
            await self.addresses.create(None, self._object(ip, owner), manager=MANAGER)
            return True
        except errors.StatusError as e:
            if e.code != 409:
                raise
        if await self._holder(ip) == owner:
            return False
        raise AllocationError("provided IP is already allocated")

    def _candidates(self) -> Iterator[str]:
        """Every usable address once: the dynamic part from a random start, then the lower part."""
        for start, end in ((self.first + self.offset, self.last), (self.first, self.first + self.offset - 1)):
            span = end - start + 1
            if span <= 0:
                continue
            origin = self.rng.randrange(span)
            for i in range(span):
                yield str(ipaddress.ip_address(start + (origin + i) % span))

    async def allocate_next(self, owner: ParentRef, dry_run: bool = False) -> str:
        """A free address for `owner` (kube's AllocateNextService); AllocationError("range is full")."""
        refused = 0
        for ip in self._candidates():
            if self._taken_in_cache(ip):
                continue
            if dry_run:
                return ip
            try:
                await self.addresses.create(None, self._object(ip, owner), manager=MANAGER)
                return ip
            except errors.StatusError as e:
                if e.code != 409:
                    raise
                refused += 1  # taken since the cache last heard
                if refused >= MAX_CREATE_ATTEMPTS:
                    break
        raise AllocationError("range is full")

    async def release(self, ip: str, owner: ParentRef) -> None:
        """Give `ip` back if `owner` holds it (never someone else's); failures are logged: the
        repair loop removes what is left."""
        if not self.contains(ip):
            return
        try:
            if await self._holder(ip) != owner:
                return
            await self.addresses.delete(None, ip, DeleteOptions())
        except errors.StatusError as e:
            if e.code != 404:
                log.warning("cluster IP %s of %s/%s not released: %s", ip, owner.namespace, owner.name, e.message)
