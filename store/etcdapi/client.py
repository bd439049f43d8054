"""A client of the members' etcd API (grpcio) with the request interface of our own client
(`store.client.client.Client.request`): the chaos workload can drive the store through
either front door with the same recorded operations and the same checker.

Requests and results cross in our wire form (store/api), converted to and from etcd's
messages here; etcd's errors come back as our typed StoreErrors, whose `outcome` the chaos
checker reads: a request etcd refused, or never proposed (no leader, too many requests), had
no effect; a timeout, a lost connection or a leader change may have had one.  No retries:
every call goes once to one endpoint (the given one, or the next in turn).
"""

from __future__ import annotations

import itertools
from typing import Any

import grpc
import grpc.aio

from store.api import errors as E
from store.api import methods as M
from store.api.kv import (
    CompactionRequest,
    CompactionResponse,
    Compare,
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
    TxnRequest,
    TxnResponse,
)
from store.api.lease import LeaseGrantRequest, LeaseGrantResponse, LeaseIdRequest, LeaseKeepAliveResponse
from store.api.protocol import Header, split_url
from store.etcdapi.convert import _FIXED
from store.etcdapi.messages import SERVICES, pb

# etcd's messages -> our errors: the inverse of what convert.status_of sends, derived from it
_ERRORS: dict[str, type[E.StoreError]] = {message: cls for cls, (_, message) in _FIXED.items()}


def error_of(e: grpc.aio.AioRpcError) -> E.StoreError:
    """Our typed error for what the member (or the transport) said."""
    details = e.details() or ""
    if details == "etcdserver: mvcc: required revision has been compacted":
        return E.CompactedError(0)
    if details == "etcdserver: mvcc: required revision is a future revision":
        return E.FutureRevisionError(0)
    cls = _ERRORS.get(details)
    if cls is E.LeaseNotFoundError:
        return E.LeaseNotFoundError(0)
    if cls is not None:
        return cls(details)
    code = e.code()
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return E.InvalidArgumentError(details)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return E.TimeoutError_(details or "deadline exceeded")
    if code == grpc.StatusCode.UNAVAILABLE:
        return E.ConnectionLost(details or "unavailable")  # sent or not: unknown
    return E.StoreError(f"{code.name}: {details}")


# -- our requests -> etcd's ---------------------------------------------------------------------


def range_pb(r: RangeRequest) -> Any:
    return pb.RangeRequest(
        key=r.key, range_end=r.range_end, limit=r.limit, revision=r.revision, sort_order=int(r.sort_order),
        sort_target=int(r.sort_target), serializable=r.serializable, keys_only=r.keys_only, count_only=r.count_only,
        min_mod_revision=r.min_mod_revision, max_mod_revision=r.max_mod_revision,
        min_create_revision=r.min_create_revision, max_create_revision=r.max_create_revision,
    )  # fmt: skip


def put_pb(r: PutRequest) -> Any:
    return pb.PutRequest(
        key=r.key, value=r.value, lease=r.lease, prev_kv=r.prev_kv, ignore_value=r.ignore_value,
        ignore_lease=r.ignore_lease,
    )  # fmt: skip


def delete_pb(r: DeleteRangeRequest) -> Any:
    return pb.DeleteRangeRequest(key=r.key, range_end=r.range_end, prev_kv=r.prev_kv)


_TARGET_FIELD = {
    CompareTarget.VERSION: "version",
    CompareTarget.CREATE: "create_revision",
    CompareTarget.MOD: "mod_revision",
    CompareTarget.VALUE: "value",
    CompareTarget.LEASE: "lease",
}


def compare_pb(c: Compare) -> Any:
    m = pb.Compare(result=int(c.result), target=int(c.target), key=c.key, range_end=c.range_end)
    setattr(m, _TARGET_FIELD[c.target], c.value)
    return m


def op_pb(op: RequestOp) -> Any:
    if isinstance(op, RangeRequest):
        return pb.RequestOp(request_range=range_pb(op))
    if isinstance(op, PutRequest):
        return pb.RequestOp(request_put=put_pb(op))
    if isinstance(op, DeleteRangeRequest):
        return pb.RequestOp(request_delete_range=delete_pb(op))
    return pb.RequestOp(request_txn=txn_pb(op))


def txn_pb(r: TxnRequest) -> Any:
    return pb.TxnRequest(
        compare=[compare_pb(c) for c in r.compare],
        success=[op_pb(o) for o in r.success],
        failure=[op_pb(o) for o in r.failure],
    )


# -- etcd's responses -> ours -------------------------------------------------------------------


def kv_of(m: Any) -> KeyValue:
    return KeyValue(m.key, m.create_revision, m.mod_revision, m.version, m.value, m.lease)


def range_of(m: Any) -> RangeResponse:
    return RangeResponse(m.header.revision, [kv_of(k) for k in m.kvs], m.more, m.count)


def put_of(m: Any) -> PutResponse:
    return PutResponse(m.header.revision, kv_of(m.prev_kv) if m.HasField("prev_kv") else None)


def delete_of(m: Any) -> DeleteRangeResponse:
    return DeleteRangeResponse(m.header.revision, m.deleted, [kv_of(k) for k in m.prev_kvs])


def response_op_of(m: Any) -> ResponseOp:
    which = m.WhichOneof("response")
    if which == "response_range":
        return range_of(m.response_range)
    if which == "response_put":
        return put_of(m.response_put)
    if which == "response_delete_range":
        return delete_of(m.response_delete_range)
    return txn_of(m.response_txn)


def txn_of(m: Any) -> TxnResponse:
    return TxnResponse(m.header.revision, m.succeeded, [response_op_of(r) for r in m.responses])


class EtcdApiClient:
    """Our Client's `request`, over the etcd API of the given members (tcp://host:port URLs)."""

    def __init__(self, endpoints: list[str], timeout: float = 5.0, credentials: grpc.ChannelCredentials | None = None):
        if not endpoints:
            raise ValueError("the client needs at least one endpoint")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.credentials = credentials
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._turn = itertools.cycle(self.endpoints)

    def _channel(self, endpoint: str) -> grpc.aio.Channel:
        ch = self._channels.get(endpoint)
        if ch is None:
            host, port = split_url(endpoint)
            target = f"{host}:{port}"
            ch = (
                grpc.aio.secure_channel(target, self.credentials)
                if self.credentials is not None
                else grpc.aio.insecure_channel(target)
            )
            self._channels[endpoint] = ch
        return ch

    async def _unary(self, endpoint: str, service: str, name: str, request: Any) -> Any:
        method = SERVICES[service][name]
        call = self._channel(endpoint).unary_unary(
            method.path,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=method.response.FromString,
        )
        try:
            # wait_for_ready: a member being restarted is waited for (up to the timeout), as our
            # own client does, rather than failed at once by a channel in back-off
            return await call(request, timeout=self.timeout, wait_for_ready=True)
        except grpc.aio.AioRpcError as e:
            raise error_of(e) from None

    async def request(self, method: M.Method[Any, Any], args: Any, endpoint: str | None = None) -> tuple[Header, Any]:
        """Send one request given in our wire form; (header, the result in our wire form)."""
        ep = endpoint or next(self._turn)
        req = method.decode_request(args)
        result: Any
        if method is M.RANGE:
            resp = await self._unary(ep, "KV", "Range", range_pb(req))
            result = range_of(resp)
        elif method is M.PUT:
            resp = await self._unary(ep, "KV", "Put", put_pb(req))
            result = put_of(resp)
        elif method is M.DELETE_RANGE:
            resp = await self._unary(ep, "KV", "DeleteRange", delete_pb(req))
            result = delete_of(resp)
        elif method is M.TXN:
            resp = await self._unary(ep, "KV", "Txn", txn_pb(req))
            result = txn_of(resp)
        elif method is M.COMPACT:
            assert isinstance(req, CompactionRequest)
            resp = await self._unary(
                ep, "KV", "Compact", pb.CompactionRequest(revision=req.revision, physical=req.physical)
            )
            result = CompactionResponse(resp.header.revision)
        elif method is M.LEASE_GRANT:
            assert isinstance(req, LeaseGrantRequest)
            resp = await self._unary(ep, "Lease", "LeaseGrant", pb.LeaseGrantRequest(TTL=req.ttl, ID=req.id))
            result = LeaseGrantResponse(resp.header.revision, resp.ID, resp.TTL)
        elif method is M.LEASE_REVOKE:
            assert isinstance(req, LeaseIdRequest)
            resp = await self._unary(ep, "Lease", "LeaseRevoke", pb.LeaseRevokeRequest(ID=req.id))
            return _header(resp), [resp.header.revision]
        elif method is M.LEASE_KEEPALIVE:
            assert isinstance(req, LeaseIdRequest)
            resp = await self._keepalive(ep, req.id)
            if resp.TTL <= 0:
                raise E.LeaseNotFoundError(req.id)
            result = LeaseKeepAliveResponse(resp.header.revision, resp.ID, resp.TTL)
        else:
            raise E.InvalidArgumentError(f"{method.name} is not sent through the etcd API client")
        return _header(resp), result.to_wire()

    async def _keepalive(self, endpoint: str, lease_id: int) -> Any:
        """One keep-alive: etcd's is a stream; one request, one answer, then it is closed."""
        method = SERVICES["Lease"]["LeaseKeepAlive"]
        call = self._channel(endpoint).stream_stream(
            method.path,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=method.response.FromString,
        )
        stream = call(timeout=self.timeout, wait_for_ready=True)
        try:
            await stream.write(pb.LeaseKeepAliveRequest(ID=lease_id))
            await stream.done_writing()
            resp = await stream.read()
        except grpc.aio.AioRpcError as e:
            raise error_of(e) from None
        finally:
            stream.cancel()
        if resp is grpc.aio.EOF:
            raise E.ConnectionLost("the keep-alive stream ended without an answer")
        return resp

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()

    async def __aenter__(self) -> EtcdApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _serialize(m: Any) -> bytes:
    data: bytes = m.SerializeToString()
    return data


def _header(m: Any) -> Header:
    h = m.header
    return Header(h.cluster_id, h.member_id, h.revision, h.raft_term)
