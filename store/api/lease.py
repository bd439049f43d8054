"""Lease requests and responses (etcd v3 shapes).  TTLs are in seconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_LEASE_TTL = 9_000_000_000
"""etcd's MaxLeaseTTL (about 285 years)."""


@dataclass(slots=True)
class LeaseGrantResponse:
    revision: int
    id: int
    ttl: int

    def to_wire(self) -> list[Any]:
        return [self.revision, self.id, self.ttl]

    @staticmethod
    def from_wire(w: list[Any]) -> LeaseGrantResponse:
        return LeaseGrantResponse(w[0], w[1], w[2])


@dataclass(slots=True)
class LeaseKeepAliveResponse:
    revision: int
    id: int
    ttl: int
    """The TTL the lease was renewed to (0: the lease is gone)."""

    def to_wire(self) -> list[Any]:
        return [self.revision, self.id, self.ttl]

    @staticmethod
    def from_wire(w: list[Any]) -> LeaseKeepAliveResponse:
        return LeaseKeepAliveResponse(w[0], w[1], w[2])


@dataclass(slots=True)
class LeaseTimeToLiveResponse:
    revision: int
    id: int
    ttl: int
    """Seconds left (-1 when the lease does not exist)."""
    granted_ttl: int
    keys: list[bytes] = field(default_factory=list)

    def to_wire(self) -> list[Any]:
        return [self.revision, self.id, self.ttl, self.granted_ttl, self.keys]

    @staticmethod
    def from_wire(w: list[Any]) -> LeaseTimeToLiveResponse:
        return LeaseTimeToLiveResponse(w[0], w[1], w[2], w[3], list(w[4]))
