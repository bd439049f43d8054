"""Lease requests and responses (etcd v3 shapes).  TTLs are in seconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from store.api.wire import INT64_MIN, Fields

MAX_LEASE_TTL = 9_000_000_000
"""etcd's MaxLeaseTTL (about 285 years)."""


@dataclass(slots=True)
class LeaseGrantRequest:
    ttl: int
    id: int = 0
    """0: the member picks an id."""

    def to_wire(self) -> list[Any]:
        return [self.ttl, self.id]

    @staticmethod
    def from_wire(w: Any, path: str = "lease_grant") -> LeaseGrantRequest:
        f = Fields(w, path, 2)
        return LeaseGrantRequest(f.integer("ttl", lo=INT64_MIN), f.integer("id", lo=INT64_MIN))


@dataclass(slots=True)
class LeaseIdRequest:
    """A request naming one lease: revoke, keep-alive."""

    id: int

    def to_wire(self) -> list[Any]:
        return [self.id]

    @staticmethod
    def from_wire(w: Any, path: str = "lease") -> LeaseIdRequest:
        return LeaseIdRequest(Fields(w, path, 1).integer("id", lo=INT64_MIN))


@dataclass(slots=True)
class LeaseTimeToLiveRequest:
    id: int
    keys: bool = False

    def to_wire(self) -> list[Any]:
        return [self.id, self.keys]

    @staticmethod
    def from_wire(w: Any, path: str = "lease_ttl") -> LeaseTimeToLiveRequest:
        f = Fields(w, path, 2)
        return LeaseTimeToLiveRequest(f.integer("id", lo=INT64_MIN), f.flag("keys"))


@dataclass(slots=True)
class LeaseRevokeResponse:
    revision: int

    def to_wire(self) -> list[Any]:
        return [self.revision]

    @staticmethod
    def from_wire(w: list[Any]) -> LeaseRevokeResponse:
        return LeaseRevokeResponse(w[0])


@dataclass(slots=True)
class LeaseLeasesResponse:
    ids: list[int]

    def to_wire(self) -> list[int]:
        return list(self.ids)

    @staticmethod
    def from_wire(w: list[Any]) -> LeaseLeasesResponse:
        return LeaseLeasesResponse([int(i) for i in w])


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
