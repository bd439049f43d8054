"""etcd's protobuf messages <-> the store's own request and response types (store/api).

The store's types already carry etcd's semantics and field names, so this is a mapping,
not a translation of meaning: a request from an etcd client becomes the very request our
own protocol would carry, checked and served by the same code.  Where etcd's edge accepts
what ours refuses (a negative limit or revision means "none" / "current" to etcd), the value
is mapped here, so that an etcd client sees etcd's behaviour.  Errors become etcd's gRPC
status codes with etcd's exact messages (`status_of`): clientv3 and kube-apiserver match on
the message text to decide retries and 410s.

Responses are built as protobuf messages; `header` makes etcd's ResponseHeader from the
member's [cluster_id, member_id, revision, raft_term], with the revision of the response
where it has one.
"""

from __future__ import annotations

from typing import Any

from store.api import errors as E
from store.api.cluster import HashKVResponse, MemberInfo, StatusResponse
from store.api.kv import (
    MAX_TXN_DEPTH,
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    RequestOp,
    ResponseOp,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
)
from store.api.lease import (
    LeaseGrantResponse,
    LeaseKeepAliveResponse,
    LeaseTimeToLiveResponse,
)
from store.api.protocol import split_url
from store.api.watch import WatchCreateRequest, WatchFilter
from store.etcdapi.messages import pb

# gRPC status codes (grpc/status.proto)
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND = 0, 1, 2, 3, 4, 5
PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, OUT_OF_RANGE = 7, 8, 9, 11
UNIMPLEMENTED, INTERNAL, UNAVAILABLE, UNAUTHENTICATED = 12, 13, 14, 16

Header = list[int]
"""[cluster_id, member_id, revision, raft_term], as the member's `_header` gives it."""


class GrpcStatus(Exception):
    """A call that ends with a non-OK gRPC status: `code` and etcd's `message`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- errors -------------------------------------------------------------------------------

_FIXED: dict[type[E.StoreError], tuple[int, str]] = {
    E.KeyEmptyError: (INVALID_ARGUMENT, "etcdserver: key is not provided"),
    E.KeyNotFoundError: (INVALID_ARGUMENT, "etcdserver: key not found"),
    E.TooManyOpsError: (INVALID_ARGUMENT, "etcdserver: too many operations in txn request"),
    E.DuplicateKeyError: (INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request"),
    E.RequestTooLargeError: (INVALID_ARGUMENT, "etcdserver: request is too large"),
    E.CompactedError: (OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted"),
    E.FutureRevisionError: (OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision"),
    E.LeaseNotFoundError: (NOT_FOUND, "etcdserver: requested lease not found"),
    E.LeaseExistsError: (FAILED_PRECONDITION, "etcdserver: lease already exists"),
    E.LeaseTTLTooLargeError: (OUT_OF_RANGE, "etcdserver: too large lease TTL"),
    E.MemberNotFoundError: (NOT_FOUND, "etcdserver: member not found"),
    E.MemberExistsError: (FAILED_PRECONDITION, "etcdserver: member ID already exist"),
    E.PeerURLExistsError: (FAILED_PRECONDITION, "etcdserver: Peer URLs already exists"),
    E.LearnerNotReadyError: (
        FAILED_PRECONDITION,
        "etcdserver: can only promote a learner member which is in sync with leader",
    ),
    E.NoLeaderError: (UNAVAILABLE, "etcdserver: no leader"),
    E.NotLeaderError: (FAILED_PRECONDITION, "etcdserver: not leader"),
    E.LeaderChangedError: (UNAVAILABLE, "etcdserver: leader changed"),
    E.TimeoutError_: (UNAVAILABLE, "etcdserver: request timed out"),
    E.TooManyRequestsError: (RESOURCE_EXHAUSTED, "etcdserver: too many requests"),
    E.NoSpaceError: (RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded"),
    E.UnavailableError: (UNAVAILABLE, "etcdserver: server stopped"),
}


def status_of(err: E.StoreError) -> GrpcStatus:
    """The gRPC status etcd answers for what `err` says; ours where etcd has no such error
    (it is still typed: INVALID_ARGUMENT for a refused request, INTERNAL for a failure)."""
    for cls in type(err).__mro__:
        fixed = _FIXED.get(cls)
        if fixed is not None:
            return GrpcStatus(*fixed)
    if isinstance(err, E.LastVoterError):
        return GrpcStatus(FAILED_PRECONDITION, f"etcdserver: {err.message}")
    if isinstance(err, E.TooManyWatchesError):
        return GrpcStatus(RESOURCE_EXHAUSTED, f"etcdserver: {err.message}")
    if isinstance(err, E.RefusedError):  # the store words some as etcd does, prefix and all
        message = err.message if err.message.startswith("etcdserver: ") else f"etcdserver: {err.message}"
        return GrpcStatus(INVALID_ARGUMENT, message)
    return GrpcStatus(INTERNAL, f"etcdserver: {err.message}")


# -- requests -----------------------------------------------------------------------------


def _sort_order(v: int) -> SortOrder:
    try:
        return SortOrder(v)
    except ValueError:
        raise GrpcStatus(INVALID_ARGUMENT, "etcdserver: invalid sort option") from None


def _sort_target(v: int) -> SortTarget:
    try:
        return SortTarget(v)
    except ValueError:
        raise GrpcStatus(INVALID_ARGUMENT, "etcdserver: invalid sort option") from None


def _range_end(key: bytes, range_end: bytes) -> bytes:
    """etcd serves a range whose end sorts before its key as an empty one (its index scan stops
    at once) where the store refuses it: [key, key) is that empty range, checked as etcd checks
    it (the key must be given, the revision readable)."""
    return key if range_end and range_end != b"\0" and range_end < key else range_end


def range_request(m: Any) -> RangeRequest:
    # etcd reads a limit <= 0 as "no limit" and a revision <= 0 as "the current one"
    return RangeRequest(
        m.key,
        _range_end(m.key, m.range_end),
        max(m.limit, 0),
        max(m.revision, 0),
        _sort_order(m.sort_order),
        _sort_target(m.sort_target),
        m.serializable,
        m.keys_only,
        m.count_only,
        max(m.min_mod_revision, 0),
        max(m.max_mod_revision, 0),
        max(m.min_create_revision, 0),
        max(m.max_create_revision, 0),
    )


def put_request(m: Any) -> PutRequest:
    # "value is provided" / "lease is provided" are the store's checks (store/mvcc/validate.py),
    # made in etcd's order: after the key's, and op by op through a txn
    return PutRequest(m.key, m.value, m.lease, m.prev_kv, m.ignore_value, m.ignore_lease)


def delete_request(m: Any) -> DeleteRangeRequest:
    return DeleteRangeRequest(m.key, _range_end(m.key, m.range_end), m.prev_kv)


_COMPARE_VALUE = {
    CompareTarget.VERSION: "version",
    CompareTarget.CREATE: "create_revision",
    CompareTarget.MOD: "mod_revision",
    CompareTarget.VALUE: "value",
    CompareTarget.LEASE: "lease",
}


def compare(m: Any) -> Compare:
    try:
        result, target = CompareResult(m.result), CompareTarget(m.target)
    except ValueError:
        raise GrpcStatus(INVALID_ARGUMENT, "etcdserver: invalid compare") from None
    value: int | bytes = getattr(m, _COMPARE_VALUE[target])  # unset: 0 or b"", as etcd reads it
    return Compare(result, target, m.key, value, _range_end(m.key, m.range_end))


def request_op(m: Any, depth: int) -> RequestOp:
    which = m.WhichOneof("request")
    if which == "request_range":
        return range_request(m.request_range)
    if which == "request_put":
        return put_request(m.request_put)
    if which == "request_delete_range":
        return delete_request(m.request_delete_range)
    if which == "request_txn":
        return txn_request(m.request_txn, depth + 1)
    raise GrpcStatus(INVALID_ARGUMENT, "etcdserver: a txn operation without a request")


def txn_request(m: Any, depth: int = 0) -> TxnRequest:
    if depth > MAX_TXN_DEPTH:
        raise GrpcStatus(INVALID_ARGUMENT, f"etcdserver: txns nested deeper than {MAX_TXN_DEPTH}")
    return TxnRequest(
        [compare(c) for c in m.compare],
        [request_op(o, depth) for o in m.success],
        [request_op(o, depth) for o in m.failure],
    )


def compaction_request(m: Any) -> CompactionRequest:
    return CompactionRequest(m.revision, m.physical)


def watch_create(m: Any) -> WatchCreateRequest:
    filters = []
    for f in m.filters:
        try:
            filters.append(WatchFilter(f))
        except ValueError:
            raise GrpcStatus(INVALID_ARGUMENT, f"etcdserver: unknown watch filter {f}") from None
    # the stream's own ids are given by the front (watch_id 0 here: the hub picks its own)
    return WatchCreateRequest(m.key, m.range_end, max(m.start_revision, 0), m.progress_notify, filters, m.prev_kv, 0)


# -- responses ----------------------------------------------------------------------------


def header(h: Header, revision: int | None = None) -> Any:
    return pb.ResponseHeader(
        cluster_id=h[0], member_id=h[1], revision=h[2] if revision is None else revision, raft_term=h[3]
    )


def key_value(kv: KeyValue) -> Any:
    return pb.KeyValue(
        key=kv.key,
        create_revision=kv.create_revision,
        mod_revision=kv.mod_revision,
        version=kv.version,
        value=kv.value,
        lease=kv.lease,
    )


def range_response(r: RangeResponse, h: Header) -> Any:
    return pb.RangeResponse(
        header=header(h, r.revision), kvs=[key_value(kv) for kv in r.kvs], more=r.more, count=r.count
    )


def put_response(r: PutResponse, h: Header) -> Any:
    out = pb.PutResponse(header=header(h, r.revision))
    if r.prev_kv is not None:
        out.prev_kv.CopyFrom(key_value(r.prev_kv))
    return out


def delete_response(r: DeleteRangeResponse, h: Header) -> Any:
    return pb.DeleteRangeResponse(
        header=header(h, r.revision), deleted=r.deleted, prev_kvs=[key_value(kv) for kv in r.prev_kvs]
    )


_SUB: Header = [0, 0, 0, 0]
"""A txn's sub-responses carry no cluster, member or term in etcd: their header is the revision alone."""


def response_op(r: ResponseOp) -> Any:
    """One of a txn's responses, its header as etcd fills it: the revision alone, and nothing
    at all for a nested txn's own header (its responses have their revisions)."""
    if isinstance(r, RangeResponse):
        return pb.ResponseOp(response_range=range_response(r, _SUB))
    if isinstance(r, PutResponse):
        return pb.ResponseOp(response_put=put_response(r, _SUB))
    if isinstance(r, DeleteRangeResponse):
        return pb.ResponseOp(response_delete_range=delete_response(r, _SUB))
    nested = txn_response(r, _SUB)
    nested.header.revision = 0
    return pb.ResponseOp(response_txn=nested)


def txn_response(r: TxnResponse, h: Header) -> Any:
    return pb.TxnResponse(
        header=header(h, r.revision), succeeded=r.succeeded, responses=[response_op(x) for x in r.responses]
    )


def lease_grant_response(r: LeaseGrantResponse, h: Header) -> Any:
    return pb.LeaseGrantResponse(header=header(h, r.revision), ID=r.id, TTL=r.ttl)


def lease_keepalive_response(r: LeaseKeepAliveResponse, h: Header) -> Any:
    return pb.LeaseKeepAliveResponse(header=header(h, r.revision), ID=r.id, TTL=r.ttl)


def lease_ttl_response(r: LeaseTimeToLiveResponse, h: Header) -> Any:
    return pb.LeaseTimeToLiveResponse(
        header=header(h, r.revision), ID=r.id, TTL=r.ttl, grantedTTL=r.granted_ttl, keys=r.keys
    )


def member(m: MemberInfo, etcd_url: str) -> Any:
    """etcd's Member: its client URL is where it serves the etcd API (what `etcdctl
    --cluster` dials), not our own protocol's.  A member without a name was added by etcd's
    MemberAdd and not started yet: etcd shows it without client URLs ("unstarted")."""
    return pb.Member(
        ID=m.id,
        name=m.name,
        peerURLs=[_http(m.peer_url)],
        clientURLs=[etcd_url] if etcd_url and m.name else [],
        isLearner=m.is_learner,
    )


BAD_MEMBER_URLS = GrpcStatus(INVALID_ARGUMENT, "etcdserver: given member URLs are invalid")


def peer_url(urls: Any) -> tuple[str, str, int]:
    """(our peer URL, host, port) from a MemberAdd's or MemberUpdate's peerURLs: one
    http(s)://host:port (a raftkube member has one peer address); BAD_MEMBER_URLS otherwise."""
    if len(urls) != 1:
        raise BAD_MEMBER_URLS
    scheme, sep, rest = urls[0].partition("://")
    if scheme not in ("http", "https") or not sep:
        raise BAD_MEMBER_URLS
    try:
        host, port = split_url("tcp://" + rest.rstrip("/"))
    except ValueError:
        raise BAD_MEMBER_URLS from None
    return "tcp://" + rest.rstrip("/"), host, port


def _http(url: str) -> str:
    """Our tcp:// URLs as etcd writes them (https://host:port)."""
    return "https://" + url.split("://", 1)[-1] if url.startswith("tcp://") else url


def hash_kv_response(r: HashKVResponse, h: Header) -> Any:
    return pb.HashKVResponse(
        header=header(h, r.revision),
        hash=r.hash & 0xFFFFFFFF,
        compact_revision=r.compact_revision or -1,  # etcd's -1: never compacted (ours says 0)
        hash_revision=r.revision,
    )


def status_response(s: StatusResponse, h: Header, version: str, errors: list[str]) -> Any:
    return pb.StatusResponse(
        header=header(h, s.revision),
        version=version,
        dbSize=s.db_size,
        dbSizeInUse=s.db_size,
        leader=s.leader,
        raftIndex=s.commit_index,
        raftTerm=s.term,
        raftAppliedIndex=s.applied_index,
        errors=errors,
        isLearner=s.role == "learner",
        storageVersion=version.rsplit(".", 1)[0] + ".0",
        downgradeInfo=pb.DowngradeInfo(),  # etcd 3.6 always sends it (no downgrade under way)
    )
