"""Cluster requests and responses: members, status, hashes, leadership (etcd's Cluster and
Maintenance services)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from store.api.protocol import split_url
from store.api.wire import INT64_MAX, UINT64_MAX, Fields

MAX_NAME = 256


@dataclass(frozen=True, slots=True)
class MemberInfo:
    """A member as the cluster knows it (replicated in the membership entries)."""

    id: int
    name: str
    peer_url: str
    client_url: str
    http_url: str
    is_learner: bool = False

    def to_wire(self) -> list[Any]:
        return [self.id, self.name, self.peer_url, self.client_url, self.http_url, self.is_learner]

    @staticmethod
    def from_wire(w: Any, path: str = "member") -> MemberInfo:
        f = Fields(w, path, 6)
        info = MemberInfo(
            f.integer("id", lo=1),
            f.text("name", MAX_NAME),
            f.text("peer_url"),
            f.text("client_url"),
            f.text("http_url"),
            f.flag("is_learner"),
        )
        for name in ("peer_url", "client_url", "http_url"):
            if name != "http_url" or info.http_url:  # a member may serve no HTTP endpoint
                _check_url(getattr(info, name), f"{path}.{name}")
        return info

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "peer_url": self.peer_url,
            "client_url": self.client_url,
            "http_url": self.http_url,
            "is_learner": self.is_learner,
        }


def _check_url(url: str, path: str) -> None:
    try:
        split_url(url)
    except ValueError as e:
        raise Fields.fail(path, str(e)) from None


# ---------------------------------------------------------------------------- requests
@dataclass(frozen=True, slots=True)
class Empty:
    """A request or response without fields (status, member list, snapshot; acknowledgements)."""

    def to_wire(self) -> list[Any]:
        return []

    @staticmethod
    def from_wire(w: Any, path: str = "request") -> Empty:
        if w is not None:  # acknowledgements are nil on the wire
            Fields(w, path, 0)
        return EMPTY


EMPTY = Empty()


@dataclass(frozen=True, slots=True)
class MemberAddRequest:
    """A member to add.  An empty name registers it "unstarted" (etcd's MemberAdd, which
    knows only its peer URL); it is named when taken over (MemberUpdateRequest)."""

    name: str
    peer_url: str
    client_url: str
    http_url: str
    is_learner: bool = False

    def to_wire(self) -> list[Any]:
        return [self.name, self.peer_url, self.client_url, self.http_url, self.is_learner]

    @staticmethod
    def from_wire(w: Any, path: str = "member_add") -> MemberAddRequest:
        f = Fields(w, path, 5)
        req = MemberAddRequest(
            f.text("name", MAX_NAME), f.text("peer_url"), f.text("client_url"), f.text("http_url"), f.flag("is_learner")
        )
        for name in ("peer_url", "client_url", "http_url"):
            _check_url(getattr(req, name), f"{path}.{name}")
        return req


@dataclass(frozen=True, slots=True)
class MemberUpdateRequest:
    """A member's name and URLs, replaced (its role stays): a member that moved, or one
    registered by etcd's MemberAdd (no name, URLs by etcd's port convention) being given the
    ones it actually runs with before it starts (`store member add NAME --id ID`).  The name
    may stay empty (an unstarted member's peer URL moved by etcd's MemberUpdate)."""

    id: int
    name: str
    peer_url: str
    client_url: str
    http_url: str

    def to_wire(self) -> list[Any]:
        return [self.id, self.name, self.peer_url, self.client_url, self.http_url]

    @staticmethod
    def from_wire(w: Any, path: str = "member_update") -> MemberUpdateRequest:
        f = Fields(w, path, 5)
        member_id, name = f.integer("id", lo=1), f.text("name", MAX_NAME)
        req = MemberUpdateRequest(member_id, name, f.text("peer_url"), f.text("client_url"), f.text("http_url"))
        for name in ("peer_url", "client_url", "http_url"):
            _check_url(getattr(req, name), f"{path}.{name}")
        return req


@dataclass(frozen=True, slots=True)
class MemberIdRequest:
    """A request naming one member: remove, promote, move leadership to it."""

    id: int

    def to_wire(self) -> list[Any]:
        return [self.id]

    @staticmethod
    def from_wire(w: Any, path: str = "member") -> MemberIdRequest:
        return MemberIdRequest(Fields(w, path, 1).integer("id", lo=1))


@dataclass(frozen=True, slots=True)
class HashKVRequest:
    revision: int = 0
    """0: the current revision."""

    def to_wire(self) -> list[Any]:
        return [self.revision]

    @staticmethod
    def from_wire(w: Any, path: str = "hash_kv") -> HashKVRequest:
        return HashKVRequest(Fields(w, path, 1).integer("revision"))


# ---------------------------------------------------------------------------- responses
@dataclass(frozen=True, slots=True)
class MemberListResponse:
    members: list[MemberInfo]

    def to_wire(self) -> list[Any]:
        return [m.to_wire() for m in self.members]

    @staticmethod
    def from_wire(w: Any, path: str = "members") -> MemberListResponse:
        if type(w) is not list:
            raise Fields.fail(path, "expected an array")
        return MemberListResponse([MemberInfo.from_wire(m, f"{path}[{i}]") for i, m in enumerate(w)])


@dataclass(frozen=True, slots=True)
class HashKVResponse:
    hash: int
    compact_revision: int
    revision: int

    def to_wire(self) -> list[Any]:
        return [self.hash, self.compact_revision, self.revision]

    @staticmethod
    def from_wire(w: Any, path: str = "hash_kv") -> HashKVResponse:
        f = Fields(w, path, 3)
        return HashKVResponse(f.integer("hash", hi=UINT64_MAX), f.integer("compact_revision"), f.integer("revision"))


@dataclass(frozen=True, slots=True)
class StatusResponse:
    """One member's view of itself and the cluster (etcd's StatusResponse, plus role and health)."""

    id: int
    name: str
    client_url: str
    peer_url: str
    role: str
    """leader, follower, candidate, pre-candidate or learner."""
    leader: int
    """0: no leader known."""
    term: int
    commit_index: int
    applied_index: int
    revision: int
    compact_revision: int
    db_keys: int
    db_size: int
    healthy: bool
    cluster_id: int

    def to_wire(self) -> list[Any]:
        return [getattr(self, f.name) for f in fields(self)]

    @staticmethod
    def from_wire(w: Any, path: str = "status") -> StatusResponse:
        f = Fields(w, path, 15)
        return StatusResponse(
            f.integer("id"),
            f.text("name"),
            f.text("client_url"),
            f.text("peer_url"),
            f.text("role"),
            f.integer("leader"),
            f.integer("term", hi=INT64_MAX),
            f.integer("commit_index"),
            f.integer("applied_index"),
            f.integer("revision"),
            f.integer("compact_revision"),
            f.integer("db_keys"),
            f.integer("db_size"),
            f.flag("healthy"),
            f.integer("cluster_id"),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
