"""The registry of client methods: one `Method` per request a member serves, shared by the
member (which decodes and dispatches by it), the client (which encodes and decodes by it)
and the CLI (through the client).  A method's name is written here and nowhere else.

Each method names its request and response types (both with `to_wire` / `from_wire`; a
request's `from_wire` checks every field), whether repeating it is harmless (`idempotent`,
which with the error's outcome decides retries: see `errors.may_retry`), and whether its
answer is a stream of frames rather than one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from store.api.cluster import (
    Empty,
    HashKVRequest,
    HashKVResponse,
    MemberAddRequest,
    MemberIdRequest,
    MemberInfo,
    MemberListResponse,
    MemberUpdateRequest,
    StatusResponse,
)
from store.api.kv import (
    CompactionRequest,
    CompactionResponse,
    DeleteRangeRequest,
    DeleteRangeResponse,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    TxnRequest,
    TxnResponse,
)
from store.api.lease import (
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseIdRequest,
    LeaseKeepAliveResponse,
    LeaseLeasesResponse,
    LeaseRevokeResponse,
    LeaseTimeToLiveRequest,
    LeaseTimeToLiveResponse,
)
from store.api.protocol import PROTOCOL
from store.api.watch import WatchCreateRequest, WatchResponse
from store.api.wire import Fields

Rq = TypeVar("Rq")
Rs = TypeVar("Rs")


@dataclass(frozen=True, slots=True)
class HelloRequest:
    """The first frame on every client connection: names the protocol version."""

    protocol: str = PROTOCOL

    def to_wire(self) -> list[Any]:
        return [self.protocol]

    @staticmethod
    def from_wire(w: Any, path: str = "hello") -> HelloRequest:
        return HelloRequest(Fields(w, path, 1).text("protocol", 64))


@dataclass(frozen=True, slots=True)
class HelloResponse:
    protocol: str

    def to_wire(self) -> str:
        return self.protocol

    @staticmethod
    def from_wire(w: Any) -> HelloResponse:
        if type(w) is not str:
            raise Fields.fail("hello", "expected str")
        return HelloResponse(w)


@dataclass(frozen=True, slots=True)
class WatchIdRequest:
    """A request naming one watch of this connection (0: every watch, for progress)."""

    watch_id: int

    def to_wire(self) -> list[Any]:
        return [self.watch_id]

    @staticmethod
    def from_wire(w: Any, path: str = "watch") -> WatchIdRequest:
        return WatchIdRequest(Fields(w, path, 1).integer("watch_id"))


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """One frame of a backup stream: the bytes of the next part."""

    data: bytes

    def to_wire(self) -> bytes:
        return self.data

    @staticmethod
    def from_wire(w: Any) -> SnapshotChunk:
        if type(w) is not bytes:
            raise Fields.fail("snapshot", "expected bytes")
        return SnapshotChunk(w)


@dataclass(frozen=True, slots=True)
class Method(Generic[Rq, Rs]):
    name: str
    decode_request: Callable[[Any], Rq]
    """The typed request from its wire array; InvalidArgumentError names the first bad field."""
    decode_response: Callable[[Any], Rs]
    idempotent: bool
    """Sending it twice does no harm (reads, keep-alives, status), so it may be retried even
    when the connection dropped after sending it."""
    stream: bool = False
    """Answered by STREAM frames and a final END frame (watch, snapshot)."""


HELLO = Method("hello", HelloRequest.from_wire, HelloResponse.from_wire, idempotent=True)
RANGE = Method("range", RangeRequest.from_wire, RangeResponse.from_wire, idempotent=True)
PUT = Method("put", PutRequest.from_wire, PutResponse.from_wire, idempotent=False)
DELETE_RANGE = Method("delete_range", DeleteRangeRequest.from_wire, DeleteRangeResponse.from_wire, idempotent=False)
TXN = Method("txn", TxnRequest.from_wire, TxnResponse.from_wire, idempotent=False)
COMPACT = Method("compact", CompactionRequest.from_wire, CompactionResponse.from_wire, idempotent=False)
LEASE_GRANT = Method("lease_grant", LeaseGrantRequest.from_wire, LeaseGrantResponse.from_wire, idempotent=False)
LEASE_REVOKE = Method("lease_revoke", LeaseIdRequest.from_wire, LeaseRevokeResponse.from_wire, idempotent=False)
LEASE_KEEPALIVE = Method("lease_keepalive", LeaseIdRequest.from_wire, LeaseKeepAliveResponse.from_wire, idempotent=True)
LEASE_TTL = Method("lease_ttl", LeaseTimeToLiveRequest.from_wire, LeaseTimeToLiveResponse.from_wire, idempotent=True)
LEASE_LEASES = Method("lease_leases", Empty.from_wire, LeaseLeasesResponse.from_wire, idempotent=True)
STATUS = Method("status", Empty.from_wire, StatusResponse.from_wire, idempotent=True)
MEMBERS = Method("members", Empty.from_wire, MemberListResponse.from_wire, idempotent=True)
MEMBER_ADD = Method("member_add", MemberAddRequest.from_wire, MemberInfo.from_wire, idempotent=False)
MEMBER_REMOVE = Method("member_remove", MemberIdRequest.from_wire, Empty.from_wire, idempotent=False)
MEMBER_PROMOTE = Method("member_promote", MemberIdRequest.from_wire, Empty.from_wire, idempotent=False)
MEMBER_UPDATE = Method("member_update", MemberUpdateRequest.from_wire, MemberInfo.from_wire, idempotent=False)
MOVE_LEADER = Method("move_leader", MemberIdRequest.from_wire, Empty.from_wire, idempotent=False)
HASH_KV = Method("hash_kv", HashKVRequest.from_wire, HashKVResponse.from_wire, idempotent=True)
WATCH = Method("watch", WatchCreateRequest.from_wire, WatchResponse.from_wire, idempotent=True, stream=True)
WATCH_CANCEL = Method("watch_cancel", WatchIdRequest.from_wire, Empty.from_wire, idempotent=True)
WATCH_PROGRESS = Method("watch_progress", WatchIdRequest.from_wire, Empty.from_wire, idempotent=True)
SNAPSHOT = Method("snapshot", Empty.from_wire, SnapshotChunk.from_wire, idempotent=True, stream=True)

METHODS: dict[str, Method[Any, Any]] = {
    m.name: m
    for m in (
        HELLO,
        RANGE,
        PUT,
        DELETE_RANGE,
        TXN,
        COMPACT,
        LEASE_GRANT,
        LEASE_REVOKE,
        LEASE_KEEPALIVE,
        LEASE_TTL,
        LEASE_LEASES,
        STATUS,
        MEMBERS,
        MEMBER_ADD,
        MEMBER_REMOVE,
        MEMBER_PROMOTE,
        MEMBER_UPDATE,
        MOVE_LEADER,
        HASH_KV,
        WATCH,
        WATCH_CANCEL,
        WATCH_PROGRESS,
        SNAPSHOT,
    )
}
