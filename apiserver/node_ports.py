"""Service NodePorts, allocated as kube-apiserver allocates them: one bitmap of the port range
kept in the store under /registry/ranges/servicenodeports, changed by compare-and-swap.

Every change reads the bitmap, flips bits and writes it back at the revision it read, so two
apiservers (or two requests in one) never both take a port; a lost race reads again.  The
bitmap is the record of what is taken across restarts; the repair loop
(apiserver/service_allocation.py) reconciles it with the Services that exist.

As kube (KEP-3668): a random port is taken from the upper part of the range first, split at
min(max(16, size/32), 128), so that the lower part stays for ports users pick.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
from collections.abc import Callable, Iterable

import orjson

from apiserver.storage.interface import KeyExistsError, RevisionConflictError, Storage
from machinery.allocation_bands import NODE_PORT_BANDS, dynamic_offset

log = logging.getLogger("raftkube.apiserver")

KEY = "/registry/ranges/servicenodeports"
DEFAULT_RANGE = (30000, 32767)
MAX_CAS_ATTEMPTS = 32


class PortAllocationError(Exception):
    """A port that cannot be had, in kube's words."""


def parse_range(text: str) -> tuple[int, int]:
    """`30000-32767` (kube's --service-node-port-range; a single port is a range of one); ValueError."""
    low, sep, high = text.strip().partition("-")
    try:
        first, last = int(low), int(high) if sep else int(low)
    except ValueError:
        raise ValueError(f"{text!r}: not a port range such as 30000-32767") from None
    if not 1 <= first <= last <= 65535:
        raise ValueError(f"{text!r}: ports must be from 1 to 65535, the first not above the last")
    return first, last


class NodePortAllocator:
    def __init__(self, storage: Storage, port_range: tuple[int, int] = DEFAULT_RANGE, rng: random.Random | None = None):
        self.storage = storage
        self.first, self.last = port_range
        self.size = self.last - self.first + 1
        self.offset = dynamic_offset(self.size, NODE_PORT_BANDS)
        self.rng = rng or random.Random()
        self._lock = asyncio.Lock()  # one change at a time from this process (the CAS covers others)

    @property
    def range_text(self) -> str:
        return f"{self.first}-{self.last}"

    def contains(self, port: int) -> bool:
        return self.first <= port <= self.last

    # -- the stored bitmap --------------------------------------------------------------------

    async def _read(self) -> tuple[set[int], int]:
        """(taken ports, revision; 0 when there is no bitmap yet)."""
        stored = await self.storage.get(KEY)
        if stored is None:
            return set(), 0
        return self._decode(stored.value), stored.revision

    def _decode(self, value: bytes) -> set[int]:
        """The taken ports of a stored bitmap.  One written for another range (the flag
        changed) is read where its ports are, and the ones outside this range are dropped at
        the next write.  One that cannot be read (corrupted) reads as empty, said in the log:
        the next write replaces it and the repair loop marks every Service's port again —
        rather than every Service write failing until someone mends the store by hand."""
        try:
            doc = orjson.loads(value)
            first, last = parse_range(str(doc.get("range", self.range_text)))
            # no more bytes than its range has bits: a huge value is not read whole
            raw = base64.b64decode(str(doc.get("data", "")), validate=True)[: (last - first + 8) // 8]
        except (ValueError, TypeError, AttributeError) as e:  # JSON, base64 (binascii) and range errors
            log.warning("the node port bitmap at %s cannot be read (%s): taken as empty until rewritten", KEY, e)
            return set()
        bits = int.from_bytes(raw, "little")
        taken = {first + i for i in range(bits.bit_length()) if bits >> i & 1}
        return {p for p in taken if self.contains(p)}

    def _encode(self, taken: Iterable[int]) -> bytes:
        bits = 0
        for port in taken:
            if self.contains(port):
                bits |= 1 << (port - self.first)
        data = base64.b64encode(bits.to_bytes((self.size + 7) // 8, "little")).decode()
        return orjson.dumps({"kind": "RangeAllocation", "apiVersion": "v1", "range": self.range_text, "data": data})

    async def change(self, edit: Callable[[set[int]], set[int]]) -> set[int]:
        """Apply `edit` (taken -> new taken, may raise) by compare-and-swap until it lands; the
        ports taken afterwards."""
        async with self._lock:
            for _ in range(MAX_CAS_ATTEMPTS):
                taken, revision = await self._read()
                after = edit(set(taken))
                if after == taken:
                    return after
                value = self._encode(after)
                try:
                    if revision == 0:
                        await self.storage.create(KEY, value)
                    else:
                        await self.storage.update(KEY, value, revision)
                    return after
                except (KeyExistsError, RevisionConflictError):
                    continue
        raise PortAllocationError("too many concurrent changes of the node port range, retry")

    async def taken(self) -> set[int]:
        return (await self._read())[0]

    # -- what a Service write does ------------------------------------------------------------

    def _check(self, port: int) -> None:
        if not self.contains(port):
            raise PortAllocationError(
                f"provided port is not in the valid range. The range of valid ports is {self.range_text}"
            )

    def _pick(self, taken: set[int]) -> int:
        for start, end in ((self.first + self.offset, self.last), (self.first, self.first + self.offset - 1)):
            span = end - start + 1
            if span <= 0:
                continue
            origin = self.rng.randrange(span)
            for i in range(span):
                port = start + (origin + i) % span
                if port not in taken:
                    return port
        raise PortAllocationError("range is full")

    async def take(self, wanted: list[int], count: int, dry_run: bool = False) -> list[int]:
        """Take every port of `wanted` (PortAllocationError naming the first that cannot be had)
        and `count` more of the free ones; the ones picked, in order."""
        for port in wanted:
            self._check(port)
        picked: list[int] = []

        def edit(taken: set[int]) -> set[int]:
            picked.clear()
            for port in wanted:
                if port in taken:
                    raise PortAllocationError("provided port is already allocated")
                taken.add(port)
            for _ in range(count):
                port = self._pick(taken)
                taken.add(port)
                picked.append(port)
            return taken

        if dry_run:
            edit(await self.taken())
            return picked
        await self.change(edit)
        return picked

    async def give_back(self, ports: Iterable[int]) -> None:
        gone = {p for p in ports if self.contains(p)}
        if gone:
            await self.change(lambda taken: taken - gone)
