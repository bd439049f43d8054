"""A small asyncio client for etcd's real v3 gRPC API (grpc.aio), messages encoded by hand.

Field numbers follow etcd's `etcdserverpb/rpc.proto` and `mvccpb/kv.proto`; `selfcheck()`
verifies each message we rely on against a running etcd.  Endpoint handling mirrors the
raftkube client: requests go to a preferred endpoint; one that cannot be reached is left
for the next, with a doubling back-off between full rounds, until the request deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from apiserver.storage import protowire as pw
from bench.store.tls import ClientTLS

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    # Reconnect quickly to a restarted member (the defaults back off up to two minutes).
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
    ("grpc.enable_retries", 0),
]


class EtcdError(Exception):
    """etcd answered with an error, or no endpoint answered in time."""


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
    key: bytes, range_end: bytes = b"", limit: int = 0, revision: int = 0, serializable: bool = False
) -> bytes:
    """RangeRequest: key=1 range_end=2 limit=3 revision=4 serializable=7."""
    return (
        pw.field_bytes(1, key)
        + pw.field_bytes(2, range_end)
        + pw.field_varint(3, limit)
        + pw.field_varint(4, revision)
        + pw.field_varint(7, serializable)
    )


def txn_put_request(puts: list[tuple[bytes, bytes]]) -> bytes:
    """TxnRequest with no compares and `success` = puts (RequestOp.request_put = 2)."""
    return b"".join(pw.field_message(2, pw.field_message(2, put_request(k, v))) for k, v in puts)


def watch_create_request(key: bytes, range_end: bytes = b"", start_revision: int = 0, prev_kv: bool = False) -> bytes:
    """WatchRequest.create_request=1 { key=1 range_end=2 start_revision=3 prev_kv=6 }."""
    create = (
        pw.field_bytes(1, key)
        + pw.field_bytes(2, range_end)
        + pw.field_varint(3, start_revision)
        + pw.field_varint(6, prev_kv)
    )
    return pw.field_message(1, create)


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
    """`tls`: mutual TLS with these files (etcd started with --client-cert-auth); else plaintext."""

    def __init__(self, endpoints: list[str], timeout: float = 5.0, tls: ClientTLS | None = None) -> None:
        if not endpoints:
            raise ValueError("the etcd client needs at least one endpoint")
        self.endpoints = [e.split("://", 1)[-1] for e in endpoints]
        self.timeout = timeout
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._preferred = 0
        self._credentials: grpc.ChannelCredentials | None = None
        if tls is not None:
            root, key, chain = tls.pem()
            self._credentials = grpc.ssl_channel_credentials(root, key, chain)

    def channel(self, endpoint: str) -> grpc.aio.Channel:
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

    async def call(self, method: str, request: bytes, endpoint: str | None = None) -> bytes:
        """One unary call; UNAVAILABLE moves on to the next endpoint (unless `endpoint` is fixed)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        backoff = 0.02
        last: Exception | None = None
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
                    if e.code() != grpc.StatusCode.UNAVAILABLE:
                        raise EtcdError(f"{method} on {ep}: {e.code().name}: {e.details()}") from None
                    last = e
                    continue
                if endpoint is None:
                    self._preferred = (self._preferred + i) % n
                return out
            if loop.time() + backoff >= deadline:
                raise EtcdError(f"{method}: no endpoint answered: {last}")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.5)

    async def put(self, key: bytes, value: bytes) -> int:
        """The revision of the write."""
        resp = await self.call("/etcdserverpb.KV/Put", put_request(key, value))
        return Header.decode(pw.first_bytes(pw.decode(resp), 1)).revision

    async def get(self, key: bytes, serializable: bool = False, endpoint: str | None = None) -> KeyValue | None:
        resp = await self.call("/etcdserverpb.KV/Range", range_request(key, serializable=serializable), endpoint)
        kvs = pw.decode(resp).get(2, [])
        return KeyValue.decode(kvs[0]) if kvs else None  # type: ignore[arg-type]

    async def range(self, key: bytes, range_end: bytes, limit: int = 0) -> tuple[Header, list[KeyValue], int]:
        """(header, kvs, count) of [key, range_end)."""
        resp = pw.decode(await self.call("/etcdserverpb.KV/Range", range_request(key, range_end, limit)))
        kvs = [KeyValue.decode(b) for b in resp.get(2, []) if isinstance(b, bytes)]
        return Header.decode(pw.first_bytes(resp, 1)), kvs, pw.first_int(resp, 4)

    async def txn_put(self, puts: list[tuple[bytes, bytes]]) -> tuple[int, bool]:
        """(revision, succeeded) of one transaction putting all `puts`."""
        resp = pw.decode(await self.call("/etcdserverpb.KV/Txn", txn_put_request(puts)))
        return Header.decode(pw.first_bytes(resp, 1)).revision, bool(pw.first_int(resp, 2))

    async def status(self, endpoint: str) -> Status:
        """Maintenance/Status of one member: header=1 version=2 dbSize=3 leader=4 raftIndex=5 raftTerm=6."""
        f = pw.decode(await self.call("/etcdserverpb.Maintenance/Status", b"", endpoint))
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
        f = pw.decode(await self.call("/etcdserverpb.Cluster/MemberList", b""))
        out = []
        for m in f.get(2, []):
            assert isinstance(m, bytes)
            mf = pw.decode(m)
            urls = [u.decode() for u in mf.get(4, []) if isinstance(u, bytes)]
            out.append((pw.first_int(mf, 1), pw.first_bytes(mf, 2).decode(), urls))
        return out


@dataclass(frozen=True)
class WatchResponse:
    header: Header
    watch_id: int
    created: bool
    canceled: bool
    compact_revision: int
    events: list[tuple[int, KeyValue]]
    """(type: 0 PUT / 1 DELETE, kv) per Event (type=1 kv=2 prev_kv=3)."""

    @staticmethod
    def decode(buf: bytes) -> WatchResponse:
        """WatchResponse: header=1 watch_id=2 created=3 canceled=4 compact_revision=5 events=11."""
        f = pw.decode(buf)
        events = []
        for e in f.get(11, []):
            assert isinstance(e, bytes)
            ef = pw.decode(e)
            events.append((pw.first_int(ef, 1), KeyValue.decode(pw.first_bytes(ef, 2))))
        return WatchResponse(
            Header.decode(pw.first_bytes(f, 1)),
            pw.first_int(f, 2),
            bool(pw.first_int(f, 3)),
            bool(pw.first_int(f, 4)),
            pw.first_int(f, 5),
            events,
        )


class WatchStream:
    """One bidi Watch stream carrying many watches; responses are counted, not fully decoded.

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
        rpc = client.channel(self.endpoint).stream_stream("/etcdserverpb.Watch/Watch")
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


async def selfcheck(endpoints: list[str]) -> dict[str, Any]:
    """Exercise every message we encode or decode against a running etcd; raise on a mismatch.

    Checks Put (revision advances), Range linearizable and serializable (key, value, revisions,
    version), Txn (succeeded, one revision for all puts), Watch (created, events from a past
    revision, event kv fields), Status (leader, version) and MemberList (names and URLs).
    """
    c = EtcdClient(endpoints)
    try:
        r1 = await c.put(b"/selfcheck/a", b"v1")
        r2 = await c.put(b"/selfcheck/a", b"v2")
        if r2 != r1 + 1:
            raise EtcdError(f"Put revisions {r1}, {r2} do not advance by one")
        kv = await c.get(b"/selfcheck/a")
        if kv is None or kv.value != b"v2" or kv.mod_revision != r2 or kv.create_revision != r1 or kv.version != 2:
            raise EtcdError(f"Range decoded {kv}, expected value v2 create {r1} mod {r2} version 2")
        kv_s = await c.get(b"/selfcheck/a", serializable=True)
        if kv_s is None or kv_s.key != b"/selfcheck/a":
            raise EtcdError(f"serializable Range decoded {kv_s}")
        rev, ok = await c.txn_put([(b"/selfcheck/t1", b"x"), (b"/selfcheck/t2", b"y")])
        if not ok or rev != r2 + 1:
            raise EtcdError(f"Txn returned revision {rev} succeeded={ok}, expected {r2 + 1} True")
        header, kvs, count = await c.range(b"/selfcheck/", prefix_end(b"/selfcheck/"))
        if count != 3 or [k.key for k in kvs] != [b"/selfcheck/a", b"/selfcheck/t1", b"/selfcheck/t2"]:
            raise EtcdError(f"prefix Range gave count {count} keys {[k.key for k in kvs]}")
        if header.revision != rev or header.cluster_id == 0 or header.member_id == 0:
            raise EtcdError(f"ResponseHeader decoded {header}")
        st = await c.status(c.endpoints[0])
        if not st.version.startswith("3.") or st.leader == 0 or st.raft_term == 0:
            raise EtcdError(f"Status decoded {st}")
        members = await c.member_list()
        if len(members) != len(endpoints) or not all(urls for _, _, urls in members):
            raise EtcdError(f"MemberList decoded {members}")
        # Watch from the first revision: the two puts and the txn's two puts, one response per revision.
        seen: list[tuple[int, int, bool, bool]] = []
        raw: list[WatchResponse] = []
        got = asyncio.Event()

        def on_response(wid: int, n: int, created: bool, canceled: bool) -> None:
            seen.append((wid, n, created, canceled))
            if sum(x[1] for x in seen) >= 4:
                got.set()

        ws = WatchStream(c, c.endpoints[0], on_response, lambda b: raw.append(WatchResponse.decode(b)))
        ws.create(b"/selfcheck/", prefix_end(b"/selfcheck/"), start_revision=r1)
        try:
            await asyncio.wait_for(got.wait(), 5)
        finally:
            await ws.close()
        if not seen[0][2] or not raw[0].created:
            raise EtcdError(f"first WatchResponse was not a creation: {seen}")
        events = [ev for r in raw for ev in r.events]
        expect = [(b"/selfcheck/a", b"v1", r1), (b"/selfcheck/a", b"v2", r2)]
        expect += [(b"/selfcheck/t1", b"x", rev), (b"/selfcheck/t2", b"y", rev)]
        got_events = [(kv.key, kv.value, kv.mod_revision) for t, kv in events if t == 0]
        if got_events != expect or raw[-1].header.revision < rev:
            raise EtcdError(f"watch events decoded {got_events}, expected {expect}")
        return {"version": st.version, "leader": st.leader, "members": [name for _, name, _ in members]}
    finally:
        await c.close()
