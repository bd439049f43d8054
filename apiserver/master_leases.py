"""Which apiservers are alive, for `default/kubernetes`'s endpoints: kube-apiserver's "lease"
endpoint reconciler (pkg/controlplane/reconcilers/lease.go), so that with apiservers at
addresses of their own (`raftkube up --hosts netns`, an HA set) in-cluster clients reach each
of them, and a dead one leaves the list.

Each apiserver keeps a key `/registry/masterleases/<its advertised IP>` (kube's layout) whose
value says until when it holds (now + TTL_S), renewed at every reconcile round (10 s); the
round then reads every key under the prefix and lists the IPs whose time has not run out.
A key whose time ran out is deleted by whoever sees it (compare-and-delete at the revision it
read, so a renewal that came between wins).  kube gives the keys an etcd lease instead; the
storage interface here has none, and a timestamp needs only the clocks of the apiservers of
one cluster to agree within the TTL.  Values that are not ours (a kube-apiserver's Endpoints)
are skipped, not deleted.

Several apiservers may advertise one address (an HA set on one host names the balancer): they
then renew one key, and the one stopping does not remove it (MasterLeases.release is for an
apiserver that advertises itself).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apiserver.storage.interface import KeyExistsError, RevisionConflictError, Storage, StorageError

log = logging.getLogger("raftkube.apiserver")

PREFIX = "/registry/masterleases/"
TTL_S = 15.0  # kube's DefaultEndpointReconcilerTTL
MAX_LEASES = 100
"""Keys read per round (kube lists them all; a cluster has a handful of apiservers)."""


@dataclass(frozen=True)
class Held:
    ip: str
    port: int
    until: float


def parse(value: bytes) -> Held | None:
    """A lease value of ours, or None (another format, or damaged)."""
    try:
        doc: Any = json.loads(value)
        held = Held(str(ipaddress.ip_address(doc["ip"])), int(doc["port"]), float(doc["until"]))
    except (ValueError, KeyError, TypeError):
        return None
    return held if 0 < held.port < 65536 else None


class MasterLeases:
    def __init__(
        self, storage: Storage, ip: str, port: int, ttl: float = TTL_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.storage, self.ip, self.port, self.ttl, self.clock = storage, ip, port, ttl, clock
        self.key = PREFIX + ip

    def _value(self) -> bytes:
        return json.dumps({"ip": self.ip, "port": self.port, "until": self.clock() + self.ttl}).encode()

    async def renew(self) -> None:
        """Hold this apiserver's key for TTL_S more (made when missing).  A conflict means another
        apiserver of the same address renewed it meanwhile: held either way."""
        current = await self.storage.get(self.key)
        with contextlib.suppress(KeyExistsError, RevisionConflictError):
            if current is None:
                await self.storage.create(self.key, self._value())
            else:
                await self.storage.update(self.key, self._value(), current.revision)

    async def live(self) -> list[str]:
        """The advertised IPs whose keys still hold, sorted (kube's order); expired keys deleted."""
        page = await self.storage.list(PREFIX, limit=MAX_LEASES)
        now = self.clock()
        ips = set()
        for item in page.items:
            held = parse(item.value)
            if held is None:
                continue
            if held.until >= now:
                ips.add(held.ip)
                continue
            try:
                await self.storage.delete(item.key, expected_revision=item.revision)
                log.info("default/kubernetes: %s's lease ran out; removed", held.ip)
            except StorageError:  # renewed meanwhile, or gone already
                pass
        return sorted(ips, key=ipaddress.ip_address)

    async def release(self) -> None:
        """Give up the key (an apiserver that advertises itself, stopping): the others' next
        round drops its address at once rather than after the TTL."""
        current = await self.storage.get(self.key)
        held = parse(current.value) if current is not None else None
        if current is not None and held is not None and held.port == self.port:
            with contextlib.suppress(StorageError):
                await self.storage.delete(self.key, expected_revision=current.revision)
