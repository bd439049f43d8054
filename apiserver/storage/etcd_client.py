"""A small asyncio client for etcd's real v3 gRPC API (grpc.aio), messages encoded by hand.

Used by the apiserver's etcd backend (`etcd.py`) and by the store benchmark.  Field numbers
follow etcd's `etcdserverpb/rpc.proto` and `mvccpb/kv.proto`.  Endpoint handling mirrors the
raftkube client: requests go to a preferred endpoint; one that cannot be reached is left for
the next, with a doubling back-off between full rounds, until the request deadline.

What may be sent again follows from the error (`outcome`): a request refused before etcd
proposed it (no connection, no leader, too many requests) goes to the next endpoint; one
whose outcome is unknown (leader changed, timed out, connection lost) is sent again only
when the caller says it is idempotent.  grpcio is needed only here: `pip install grpcio`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

try:
    import grpc
    import grpc.aio
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        "the etcd storage backend needs grpcio: pip install grpcio (or pip install 'raftkube[etcd]')"
    ) from e

from apiserver.storage import protowire as pw
from apiserver.storage.h2grpc import GrpcStream, StreamEnded, tls_context

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    # Reconnect quickly to a restarted member (the defaults back off up to two minutes).
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
    ("grpc.enable_retries", 0),
]

RANGE = "/etcdserverpb.KV/Range"
PUT = "/etcdserverpb.KV/Put"
TXN = "/etcdserverpb.KV/Txn"
COMPACT = "/etcdserverpb.KV/Compact"
WATCH = "/etcdserverpb.Watch/Watch"
STATUS = "/etcdserverpb.Maintenance/Status"
MEMBER_LIST = "/etcdserverpb.Cluster/MemberList"

NOT_APPLIED = (
    "failed to connect to all addresses",
    "connection refused",
    "etcdserver: no leader",
    "etcdserver: not capable",
    "etcdserver: too many requests",
)
"""Error details (lower case) that say etcd never proposed the request."""

Outcome = Literal["not-applied", "unknown", "refused"]


def outcome(code: str, details: str) -> Outcome:
    """What became of a request that failed with this gRPC status (code name and details)."""
    d = details.lower()
    if code in ("UNAVAILABLE", "RESOURCE_EXHAUSTED") and any(s in d for s in NOT_APPLIED):
        return "not-applied"
    if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"):
        return "unknown"
    return "refused"


class EtcdError(Exception):
    """etcd answered with an error, or no endpoint answered in time."""

    def __init__(self, message: str, code: str = "UNKNOWN", details: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.details = details


class EtcdUnavailable(EtcdError):
    """Not applied: no endpoint could take the request before the deadline."""


class EtcdAmbiguous(EtcdError):
    """A request that may or may not have been applied (sent, then no answer)."""


class EtcdCompacted(EtcdError):
    """The revision asked for is compacted; `compact_revision` is 0 when etcd did not say."""

    def __init__(self, message: str, compact_revision: int = 0) -> None:
        super().__init__(message, "OUT_OF_RANGE", message)
        self.compact_revision = compact_revision


class EtcdFutureRevision(EtcdError):
    """The revision asked for is past etcd's current revision."""


def error_of(method: str, endpoint: str, e: Any) -> EtcdError:
    """The typed error for a failed call (`e`: a grpc.aio.AioRpcError)."""
    code: str = e.code().name
    details: str = e.details() or ""
    message = f"{method} on {endpoint}: {code}: {details}"
    if "required revision has been compacted" in details:
        return EtcdCompacted(message)
    if "required revision is a future revision" in details:
        return EtcdFutureRevision(message, code, details)
    kind = outcome(code, details)
    if kind == "not-applied":
        return EtcdUnavailable(message, code, details)
    if kind == "unknown":
        return EtcdAmbiguous(message, code, details)
    return EtcdError(message, code, details)


class PemSource(Protocol):
    def pem(self) -> tuple[bytes, bytes, bytes]:
        """(CA certificate, client key, client certificate chain) as PEM bytes."""
        ...


@dataclass(frozen=True)
class EtcdTLS:
    """Mutual TLS with etcd (started with --client-cert-auth): PEM bytes, as gRPC takes them."""

    ca: bytes
    key: bytes
    cert: bytes

    def pem(self) -> tuple[bytes, bytes, bytes]:
        return self.ca, self.key, self.cert


# ---------------------------------------------------------------- messages
@dataclass(frozen=True)
class Header:
    cluster_id: int
    member_id: int
    revision: int
    raft_term: int

    @staticmethod
    def decode(buf: bytes) -> Header:
        f = pw.decode(buf)
        return Header(pw.first_int(f, 1), pw.first_int(f, 2), pw.first_int(f, 3), pw.first_int(f, 4))


@dataclass(frozen=True)
class KeyValue:
    key: bytes
    create_revision: int
    mod_revision: int
    version: int
    value: bytes
    lease: int

    @staticmethod
    def decode(buf: bytes) -> KeyValue:
        f = pw.decode(buf)
        return KeyValue(
            pw.first_bytes(f, 1),
            pw.first_int(f, 2),
            pw.first_int(f, 3),
            pw.first_int(f, 4),
            pw.first_bytes(f, 5),
            pw.first_int(f, 6),
        )


def _kvs(f: dict[int, list[int | bytes]], number: int) -> list[KeyValue]:
    return [KeyValue.decode(b) for b in f.get(number, []) if isinstance(b, bytes)]


@dataclass(frozen=True)
class RangeResult:
    """RangeResponse: header=1 kvs=2 more=3 count=4."""

    header: Header
    kvs: list[KeyValue]
    more: bool
    count: int

    @staticmethod
    def decode(buf: bytes) -> RangeResult:
        f = pw.decode(buf)
        return RangeResult(
            Header.decode(pw.first_bytes(f, 1)), _kvs(f, 2), bool(pw.first_int(f, 3)), pw.first_int(f, 4)
        )


@dataclass(frozen=True)
class DeleteResult:
    """DeleteRangeResponse: header=1 deleted=2 prev_kvs=3."""

    header: Header
    deleted: int
    prev_kvs: list[KeyValue]

    @staticmethod
    def decode(buf: bytes) -> DeleteResult:
        f = pw.decode(buf)
        return DeleteResult(Header.decode(pw.first_bytes(f, 1)), pw.first_int(f, 2), _kvs(f, 3))


@dataclass(frozen=True)
class TxnResult:
    """TxnResponse: header=1 succeeded=2 responses=3; each ResponseOp is kept as
    (field number: 1 range, 2 put, 3 delete_range, 4 txn; its encoded response)."""

    header: Header
    succeeded: bool
    responses: list[tuple[int, bytes]]

    @staticmethod
    def decode(buf: bytes) -> TxnResult:
        f = pw.decode(buf)
        ops: list[tuple[int, bytes]] = []
        for r in f.get(3, []):
            if isinstance(r, bytes):
                ops.extend((n, v) for n, _, v in pw.iter_fields(r) if isinstance(v, bytes))
        return TxnResult(Header.decode(pw.first_bytes(f, 1)), bool(pw.first_int(f, 2)), ops)


@dataclass(frozen=True)
class Event:
    """mvccpb.Event: type=1 (0 PUT, 1 DELETE) kv=2 prev_kv=3."""

    type: int
    kv: KeyValue
    prev_kv: KeyValue | None

    @staticmethod
    def decode(buf: bytes) -> Event:
        f = pw.decode(buf)
        prev = pw.first_bytes(f, 3)
        return Event(pw.first_int(f, 1), KeyValue.decode(pw.first_bytes(f, 2)), KeyValue.decode(prev) if prev else None)


@dataclass(frozen=True)
class WatchResponse:
    """WatchResponse: header=1 watch_id=2 created=3 canceled=4 compact_revision=5 cancel_reason=6 events=11."""

    header: Header
    watch_id: int
    created: bool
    canceled: bool
    compact_revision: int
    cancel_reason: str
    events: list[Event] = field(default_factory=list)

    @staticmethod
    def decode(buf: bytes) -> WatchResponse:
        f = pw.decode(buf)
        return WatchResponse(
            Header.decode(pw.first_bytes(f, 1)),
            pw.first_int(f, 2),
            bool(pw.first_int(f, 3)),
            bool(pw.first_int(f, 4)),
            pw.first_int(f, 5),
            pw.first_bytes(f, 6).decode(errors="replace"),
            [Event.decode(e) for e in f.get(11, []) if isinstance(e, bytes)],
        )

    @property
    def is_progress(self) -> bool:
        """A progress notification: no events, neither created nor canceled."""
        return not self.events and not self.created and not self.canceled


@dataclass(frozen=True)
class Status:
    header: Header
    version: str
    db_size: int
    leader: int
    raft_index: int
    raft_term: int


# ---------------------------------------------------------------- request encoders
def put_request(key: bytes, value: bytes, lease: int = 0, prev_kv: bool = False) -> bytes:
    """PutRequest: key=1 value=2 lease=3 prev_kv=4."""
    return pw.field_bytes(1, key) + pw.field_bytes(2, value) + pw.field_varint(3, lease) + pw.field_varint(4, prev_kv)


def range_request(
    key: bytes,
    range_end: bytes = b"",
    limit: int = 0,
    revision: int = 0,
    serializable: bool = False,
    count_only: bool = False,
) -> bytes:
    """RangeRequest: key=1 range_end=2 limit=3 revision=4 serializable=7 count_only=9."""
    return (
        pw.field_bytes(1, key)
        + pw.field_bytes(2, range_end)
        + pw.field_varint(3, limit)
        + pw.field_varint(4, revision)
        + pw.field_varint(7, serializable)
        + pw.field_varint(9, count_only)
    )


def delete_request(key: bytes, range_end: bytes = b"", prev_kv: bool = False) -> bytes:
    """DeleteRangeRequest: key=1 range_end=2 prev_kv=3."""
    return pw.field_bytes(1, key) + pw.field_bytes(2, range_end) + pw.field_varint(3, prev_kv)


COMPARE_EQUAL, COMPARE_GREATER, COMPARE_LESS, COMPARE_NOT_EQUAL = 0, 1, 2, 3
TARGET_VERSION, TARGET_CREATE, TARGET_MOD = 0, 1, 2


def compare(key: bytes, target: int, result: int, value: int) -> bytes:
    """Compare: result=1 target=2 key=3, and the oneof target_union (version=4 create_revision=5
    mod_revision=6), written even when 0 since a oneof member is present or not."""
    union = 4 + target
    return (
        pw.field_varint(1, result)
        + pw.field_varint(2, target)
        + pw.field_bytes(3, key)
        + pw.varint(union << 3 | pw.VARINT)
        + pw.varint(value)
    )


def op_range(request: bytes) -> bytes:
    """RequestOp: request_range=1 request_put=2 request_delete_range=3."""
    return pw.field_message(1, request)


def op_put(request: bytes) -> bytes:
    return pw.field_message(2, request)


def op_delete(request: bytes) -> bytes:
    return pw.field_message(3, request)


def txn_request(compares: list[bytes], success: list[bytes], failure: list[bytes] | None = None) -> bytes:
    """TxnRequest: compare=1 success=2 failure=3 (each a list of encoded messages)."""
    return (
        b"".join(pw.field_message(1, c) for c in compares)
        + b"".join(pw.field_message(2, o) for o in success)
        + b"".join(pw.field_message(3, o) for o in failure or [])
    )


def txn_put_request(puts: list[tuple[bytes, bytes]]) -> bytes:
    """A TxnRequest with no compares and `success` = puts."""
    return txn_request([], [op_put(put_request(k, v)) for k, v in puts])


def watch_create_request(key: bytes, range_end: bytes = b"", start_revision: int = 0, prev_kv: bool = False) -> bytes:
    """WatchRequest.create_request=1 { key=1 range_end=2 start_revision=3 prev_kv=6 }."""
    create = (
        pw.field_bytes(1, key)
        + pw.field_bytes(2, range_end)
        + pw.field_varint(3, start_revision)
        + pw.field_varint(6, prev_kv)
    )
    return pw.field_message(1, create)


WATCH_PROGRESS_REQUEST = pw.field_message(3, b"")
"""WatchRequest.progress_request=3: an empty WatchProgressRequest (present, as a oneof member)."""


def prefix_end(prefix: bytes) -> bytes:
    """etcd's range_end for 'every key with this prefix'."""
    b = bytearray(prefix)
    for i in range(len(b) - 1, -1, -1):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[: i + 1])
    return b"\0"


# ---------------------------------------------------------------- client
class EtcdClient:
    """`tls`: mutual TLS with these PEMs (etcd started with --client-cert-auth); else plaintext."""

    def __init__(self, endpoints: list[str], timeout: float = 5.0, tls: PemSource | None = None) -> None:
        if not endpoints:
            raise ValueError("the etcd client needs at least one endpoint")
        self.endpoints = [e.split("://", 1)[-1] for e in endpoints]
        self.timeout = timeout
        self._channels: dict[str, Any] = {}
        self._preferred = 0
        self._credentials: Any = None
        self._tls: ssl.SSLContext | None = None
        """The same certificates for the watch streams (h2grpc.py)."""
        if tls is not None:
            root, key, chain = tls.pem()
            self._credentials = grpc.ssl_channel_credentials(root, key, chain)
            self._tls = tls_context(root, key, chain)

    def channel(self, endpoint: str) -> Any:
        """The grpc.aio.Channel to `endpoint` (one per endpoint, made on first use)."""
        ch = self._channels.get(endpoint)
        if ch is None:
            if self._credentials is None:
                ch = grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS)
            else:
                # The member certificates name 127.0.0.1 and localhost: gRPC checks the name dialled.
                ch = grpc.aio.secure_channel(endpoint, self._credentials, options=CHANNEL_OPTIONS)
            self._channels[endpoint] = ch
        return ch

    def prefer(self, endpoint: str) -> None:
        ep = endpoint.split("://", 1)[-1]
        if ep not in self.endpoints:
            self.endpoints.append(ep)
        self._preferred = self.endpoints.index(ep)

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()

    async def call(self, method: str, request: bytes, endpoint: str | None = None, *, idempotent: bool = True) -> bytes:
        """One unary call.  A request etcd did not take moves on to the next endpoint (unless
        `endpoint` is fixed); one whose outcome is unknown too, but only if `idempotent`, else
        EtcdAmbiguous.  EtcdUnavailable when no endpoint took it before the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        backoff = 0.02
        last: EtcdError | None = None
        while True:
            n = 1 if endpoint else len(self.endpoints)
            for i in range(n):
                ep = endpoint.split("://", 1)[-1] if endpoint else self.endpoints[(self._preferred + i) % n]
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                rpc = self.channel(ep).unary_unary(method)
                try:
                    out: bytes = await rpc(request, timeout=remaining)
                except grpc.aio.AioRpcError as e:
                    err = error_of(method, ep, e)
                    if isinstance(err, EtcdAmbiguous) and not idempotent:
                        raise err from None
                    if not isinstance(err, EtcdUnavailable | EtcdAmbiguous):
                        raise err from None
                    last = err
                    continue
                if endpoint is None:
                    self._preferred = (self._preferred + i) % n
                return out
            if loop.time() + backoff >= deadline:
                raise EtcdUnavailable(f"{method}: no endpoint answered in {self.timeout}s: {last}")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.5)

    async def put(self, key: bytes, value: bytes) -> int:
        """The revision of the write (sent again on an unknown outcome: for the benchmark)."""
        resp = await self.call(PUT, put_request(key, value))
        return Header.decode(pw.first_bytes(pw.decode(resp), 1)).revision

    async def get(self, key: bytes, serializable: bool = False, endpoint: str | None = None) -> KeyValue | None:
        resp = await self.call(RANGE, range_request(key, serializable=serializable), endpoint)
        kvs = _kvs(pw.decode(resp), 2)
        return kvs[0] if kvs else None

    async def range(
        self, key: bytes, range_end: bytes = b"", limit: int = 0, revision: int = 0, count_only: bool = False
    ) -> RangeResult:
        """A linearizable Range of [key, range_end)."""
        return RangeResult.decode(
            await self.call(RANGE, range_request(key, range_end, limit, revision, False, count_only))
        )

    async def txn(self, request: bytes) -> TxnResult:
        """A transaction (see `txn_request`); never sent twice when its outcome is unknown."""
        return TxnResult.decode(await self.call(TXN, request, idempotent=False))

    async def txn_put(self, puts: list[tuple[bytes, bytes]]) -> tuple[int, bool]:
        """(revision, succeeded) of one transaction putting all `puts`."""
        resp = pw.decode(await self.call(TXN, txn_put_request(puts)))
        return Header.decode(pw.first_bytes(resp, 1)).revision, bool(pw.first_int(resp, 2))

    async def compact(self, revision: int) -> int:
        """CompactionRequest revision=1; the revision etcd was at.  Compacting twice is harmless."""
        resp = await self.call(COMPACT, pw.field_varint(1, revision))
        return Header.decode(pw.first_bytes(pw.decode(resp), 1)).revision

    async def status(self, endpoint: str) -> Status:
        """Maintenance/Status of one member: header=1 version=2 dbSize=3 leader=4 raftIndex=5 raftTerm=6."""
        f = pw.decode(await self.call(STATUS, b"", endpoint))
        return Status(
            Header.decode(pw.first_bytes(f, 1)),
            pw.first_bytes(f, 2).decode(),
            pw.first_int(f, 3),
            pw.first_int(f, 4),
            pw.first_int(f, 5),
            pw.first_int(f, 6),
        )

    async def member_list(self) -> list[tuple[int, str, list[str]]]:
        """(id, name, client URLs) per member: Member ID=1 name=2 peerURLs=3 clientURLs=4."""
        f = pw.decode(await self.call(MEMBER_LIST, b""))
        out = []
        for m in f.get(2, []):
            assert isinstance(m, bytes)
            mf = pw.decode(m)
            urls = [u.decode() for u in mf.get(4, []) if isinstance(u, bytes)]
            out.append((pw.first_int(mf, 1), pw.first_bytes(mf, 2).decode(), urls))
        return out

    def watch(self, key: bytes, range_end: bytes = b"", start_revision: int = 0, prev_kv: bool = False) -> EtcdWatch:
        """One watch on its own stream (see EtcdWatch)."""
        return EtcdWatch(self, key, range_end, start_revision, prev_kv)


class EtcdWatch:
    """Every WatchResponse of one watch, on its own bidirectional stream and connection (not
    grpc.aio: every message that arrived is taken per read, see h2grpc.py).  A lost stream is
    re-created on the next endpoint from one past the last revision delivered (no gap, no
    repeat), for up to the client timeout; a canceled response (e.g. compacted) is the last one.

    `request_progress()` sends a WatchProgressRequest on the current stream; etcd answers with a
    response without events (`is_progress`) at its revision.  Only etcd >= 3.4.31 / 3.5.13 sends
    it after every event it covers (etcd#15220): older ones may send it first (see etcd.py)."""

    def __init__(self, client: EtcdClient, key: bytes, range_end: bytes, start_revision: int, prev_kv: bool) -> None:
        self.client = client
        self.key = key
        self.range_end = range_end
        self.prev_kv = prev_kv
        self.next_revision = start_revision
        """Where a re-created stream starts: one past the last revision delivered."""
        self._send: Callable[[bytes], None] | None = None
        """Sends a request on the current stream, while one is open."""
        self._responses = self._run()

    def __aiter__(self) -> EtcdWatch:
        return self

    async def __anext__(self) -> WatchResponse:
        return await self._responses.__anext__()

    async def aclose(self) -> None:
        await self._responses.aclose()

    def request_progress(self) -> bool:
        """Ask for a progress notification; False when no stream is open (etcd answers it after
        creating the watch: requests on a stream are taken in order)."""
        if self._send is None:
            return False
        self._send(WATCH_PROGRESS_REQUEST)
        return True

    async def _run(self) -> AsyncGenerator[WatchResponse, None]:
        client = self.client
        loop = asyncio.get_running_loop()
        failing_since: float | None = None
        attempt = 0
        while True:
            ep = client.endpoints[(client._preferred + attempt) % len(client.endpoints)]
            try:
                async with contextlib.aclosing(self._stream(ep)) as batches:
                    async for batch in batches:
                        for msg in batch:
                            resp = WatchResponse.decode(msg)
                            failing_since = None
                            if resp.events:
                                self.next_revision = resp.events[-1].kv.mod_revision + 1
                            elif resp.created:
                                if self.next_revision == 0:
                                    self.next_revision = resp.header.revision + 1
                            elif resp.is_progress:
                                self.next_revision = max(self.next_revision, resp.header.revision + 1)
                            yield resp
                            if resp.canceled:
                                return
                raise EtcdAmbiguous(f"watch stream on {ep} ended", "UNAVAILABLE")
            except (EtcdAmbiguous, StreamEnded, OSError, TimeoutError):
                pass
            now = loop.time()
            failing_since = now if failing_since is None else failing_since
            if now - failing_since > client.timeout:
                raise EtcdUnavailable(f"watch: no endpoint answered in {client.timeout}s")
            attempt += 1
            await asyncio.sleep(0.05)

    async def _stream(self, ep: str) -> AsyncGenerator[list[bytes], None]:
        """The batches of WatchResponse messages of one stream to `ep` (our own HTTP/2
        connection, see h2grpc.py), which is asked to create the watch; progress requests go
        to it while it is open."""
        host, _, port = ep.rpartition(":")
        stream = await GrpcStream.open(host.strip("[]"), int(port), WATCH, self.client.timeout, self.client._tls)
        stream.send(watch_create_request(self.key, self.range_end, self.next_revision, self.prev_kv))
        self._send = stream.send
        try:
            async for batch in stream:
                yield batch
        finally:
            self._send = None
            await stream.close()


class WatchStream:
    """One bidi Watch stream carrying many watches; responses are counted, not decoded (the
    watch benchmark must measure the server, not a slow Python decoder).

    `on_response(watch_id, events, created, canceled)` is called for every WatchResponse.
    Creation responses arrive in the order the creates were sent (etcd assigns ids).
    """

    def __init__(
        self,
        client: EtcdClient,
        endpoint: str,
        on_response: Callable[[int, int, bool, bool], None],
        on_raw: Callable[[bytes], None] | None = None,
    ) -> None:
        self.endpoint = endpoint.split("://", 1)[-1]
        self.on_response = on_response
        self.on_raw = on_raw
        rpc = client.channel(self.endpoint).stream_stream(WATCH)
        self._requests: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._call: Any = rpc(self._request_iter())
        self._task = asyncio.get_running_loop().create_task(self._read())
        self.error: BaseException | None = None

    async def _request_iter(self) -> Any:
        while True:
            req = await self._requests.get()
            if req is None:
                return
            yield req

    def create(self, key: bytes, range_end: bytes = b"", start_revision: int = 0) -> None:
        self._requests.put_nowait(watch_create_request(key, range_end, start_revision))

    async def _read(self) -> None:
        on_response, on_raw = self.on_response, self.on_raw
        try:
            async for resp in self._call:
                if on_raw is not None:
                    on_raw(resp)
                watch_id = created = canceled = 0
                events = 0
                pos, end = 0, len(resp)
                # Hand-rolled scan of WatchResponse: watch_id=2 created=3 canceled=4 events=11.
                while pos < end:
                    key, pos = pw.read_varint(resp, pos)
                    wtype = key & 7
                    if wtype == pw.LEN:
                        n, pos = pw.read_varint(resp, pos)
                        if key >> 3 == 11:
                            events += 1
                        pos += n
                    elif wtype == pw.VARINT:
                        v, pos = pw.read_varint(resp, pos)
                        fno = key >> 3
                        if fno == 2:
                            watch_id = v
                        elif fno == 3:
                            created = v
                        elif fno == 4:
                            canceled = v
                    elif wtype == pw.FIXED64:
                        pos += 8
                    else:
                        pos += 4
                on_response(watch_id, events, bool(created), bool(canceled))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.error = e

    async def close(self) -> None:
        self._requests.put_nowait(None)
        self._call.cancel()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
