"""Hostile etcd clients against a member process: malformed HTTP/2 and gRPC, oversized
messages, floods, streams that never read, more streams and watches than allowed.

Each attack gets etcd's answer (grpc-go's status and words) or HTTP/2's (the GOAWAY or
RST_STREAM code RFC 9113 names), the member's memory stays bounded (its RSS from
/proc/<pid>/status), its log shows no traceback, and afterwards THE MEMBER KEEPS SERVING:
an etcd call through grpcio and a call of our own protocol both succeed.  Frames are written
by hand over TLS with ALPN h2 and the admin certificate (h2wire.py); well-formed calls go
through grpcio.  test_http2.py shows the same rules in process, precisely and fast; this
shows them where sockets, TLS and the member's event loop are real (and, for the member's
watch limit made small, in a member in this process).

One single-member cluster serves the module, with a small max_request_bytes (256 KiB: gRPC
then takes messages up to 768 KiB, as etcd adds 512 KiB), a small watch_backlog_limit
(4 MiB: a watch stream is paused past 2 MiB unread; no smaller, or the hub's catch-up
responses of up to 1 MiB would pass it) and frame_timeout 2 s.  The fuzz
tests run last: they may write anything."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import struct
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.api.protocol import split_url
from store.etcdapi.grpc import PARTIAL_LIMIT
from store.etcdapi.messages import SERVICES, pb
from store.server.watch_streams import MAX_WATCHES_PER_CONNECTION
from tests.support import h2wire as w
from tests.support.cluster import StoreCluster, running_cluster
from tests.support.h2wire import RawH2
from tests.support.wait import until

MIB = 1 << 20
MAX_REQUEST = 256 << 10
GRPC_LIMIT = MAX_REQUEST + (512 << 10)
WATCH_LIMIT = 4 * MIB

RANGE = SERVICES["KV"]["Range"].path
PUT = SERVICES["KV"]["Put"].path
WATCH = SERVICES["Watch"]["Watch"].path
KEEPALIVE = SERVICES["Lease"]["LeaseKeepAlive"].path
A_RANGE = pb.RangeRequest(key=b"alive/etcd").SerializeToString()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("hostile-etcd"),
        members=1,
        max_request_bytes=MAX_REQUEST,
        watch_backlog_limit=WATCH_LIMIT,
        frame_timeout=2.0,
    ) as tc:
        yield tc


@pytest.fixture(autouse=True)
def member_log_stays_clean(cluster: StoreCluster) -> Iterator[None]:
    """No traceback, internal error or failed callback in the member log during the test."""
    log = cluster.local.member_dir(1) / "member.log"
    start = log.stat().st_size
    yield
    new = log.read_bytes()[start:].decode(errors="replace")
    for bad in ("Traceback", "internal error", "Fatal error", "Exception in callback", "exception was never"):
        assert bad not in new, new[-4000:]


# ---------------------------------------------------------------------- helpers


def port(tc: StoreCluster) -> int:
    return split_url(tc.endpoints[0])[1]


def h2_tls(tc: StoreCluster) -> ssl.SSLContext:
    ctx = tc.local.client_tls()
    assert ctx is not None
    ctx.set_alpn_protocols(["h2"])
    return ctx


def connect(tc: StoreCluster, first: bytes | None = None, buffers: int | None = None) -> RawH2:
    return RawH2.connect(port(tc), h2_tls(tc), first, buffers=buffers)


def channel(tc: StoreCluster) -> grpc.Channel:
    pki = tc.local.pki_dir
    creds = grpc.ssl_channel_credentials(
        (pki / "ca.crt").read_bytes(), (pki / "admin.key").read_bytes(), (pki / "admin.crt").read_bytes()
    )
    return grpc.secure_channel(f"127.0.0.1:{port(tc)}", creds)


def stub(ch: grpc.Channel, service: str, name: str) -> Callable[..., Any]:
    m = SERVICES[service][name]
    call: Callable[..., Any] = ch.unary_unary(
        m.path, request_serializer=lambda x: x.SerializeToString(), response_deserializer=m.response.FromString
    )
    return call


def assert_serving(tc: StoreCluster) -> None:
    """THE MEMBER KEEPS SERVING: a write and a read through grpcio, and through our own client."""
    with channel(tc) as ch:
        stub(ch, "KV", "Put")(pb.PutRequest(key=b"alive/etcd", value=b"yes"), timeout=10)
        got = stub(ch, "KV", "Range")(pb.RangeRequest(key=b"alive/etcd"), timeout=10)
        assert [kv.value for kv in got.kvs] == [b"yes"]

    async def ours() -> list[bytes]:
        async with tc.client(timeout=10) as c:
            await c.put(b"alive/ours", b"yes")
            return [kv.value for kv in (await c.get(b"alive/ours")).kvs]

    assert asyncio.run(ours()) == [b"yes"]


def rss_mib(tc: StoreCluster) -> float:
    pid = tc.local.pid(1)
    assert pid is not None
    m = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert m is not None
    return int(m.group(1)) / 1024


def metric(tc: StoreCluster, name: str) -> float:
    info = next(m for m in tc.local.members() if m.id == 1)
    with urllib.request.urlopen(info.http_url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m is not None, name
    return float(m.group(1))


def watchers(tc: StoreCluster) -> int:
    return int(metric(tc, "raftkube_watchers"))


def watch_create(key: bytes, range_end: bytes = b"") -> bytes:
    return w.grpc_message(
        pb.WatchRequest(create_request=pb.WatchCreateRequest(key=key, range_end=range_end)).SerializeToString()
    )


def open_watches(conn: RawH2, sid: int, count: int, prefix: bytes = b"w/") -> list[Any]:
    """`count` watches on stream `sid`: created and answered (the client gives its windows)."""
    body = b"".join(watch_create(prefix + b"%d" % i) for i in range(count))
    conn.send(w.headers(sid, w.grpc_headers(WATCH)))
    for off in range(0, len(body), 1 << 20):
        conn.send(w.data(sid, body[off : off + (1 << 20)]))
    a = conn.read(lambda a: len(a.messages(sid)) >= count, timeout=60)
    got = [pb.WatchResponse.FromString(m) for m in a.messages(sid)]
    assert len(got) >= count and all(r.created for r in got[:count]), got[-1:]
    return got


GENEROUS = (w.INITIAL_WINDOW_SIZE, (1 << 31) - 1)
"""A client that always reads: windows as large as HTTP/2 allows."""


def generous_hello() -> bytes:
    return w.hello(GENEROUS) + w.window_update(0, (1 << 31) - 1 - 65_535)


# ---------------------------------------------------------------------- bad calls

BAD_CALLS: list[tuple[str, Callable[[int], bytes], tuple[int, str]]] = [
    (
        "an unknown method",
        lambda s: w.unary(s, "/etcdserverpb.KV/Nope", b""),
        (w.UNIMPLEMENTED, "unknown method Nope for service etcdserverpb.KV"),
    ),
    (
        "an unknown service",
        lambda s: w.unary(s, "/etcdserverpb.Nope/Range", b""),
        (w.UNIMPLEMENTED, "unknown service etcdserverpb.Nope"),
    ),
    (
        "grpc-encoding gzip",
        lambda s: (
            w.headers(s, w.grpc_headers(RANGE, (b"grpc-encoding", b"gzip"))) + w.data(s, w.grpc_message(b""), end=True)
        ),
        (w.UNIMPLEMENTED, 'grpc: Decompressor is not installed for grpc-encoding "gzip"'),
    ),
    (
        "a message flagged compressed",
        lambda s: w.headers(s, w.grpc_headers(RANGE)) + w.data(s, w.grpc_message(b"", compressed=True), end=True),
        (w.INTERNAL, "grpc: compressed flag set with identity or empty encoding"),
    ),
    (
        "a message over the limit",
        lambda s: w.headers(s, w.grpc_headers(RANGE)) + w.data(s, struct.pack(">BI", 0, GRPC_LIMIT + 1)),
        (w.RESOURCE_EXHAUSTED, f"grpc: received message larger than max ({GRPC_LIMIT + 1} vs. {GRPC_LIMIT})"),
    ),
    (
        "a put over max_request_bytes",
        lambda s: w.unary(s, PUT, pb.PutRequest(key=b"big", value=b"v" * (MAX_REQUEST + 1)).SerializeToString()),
        (w.INVALID_ARGUMENT, "etcdserver: request is too large"),
    ),
    (
        "a past deadline",
        lambda s: w.headers(s, w.grpc_headers(RANGE, (b"grpc-timeout", b"50m"))),
        (w.DEADLINE_EXCEEDED, "context deadline exceeded"),
    ),
    (
        "a malformed grpc-timeout",
        lambda s: w.headers(s, w.grpc_headers(RANGE, (b"grpc-timeout", b"soon")), end=True),
        (w.INTERNAL, 'malformed grpc-timeout: "soon"'),
    ),
    (
        "END_STREAM inside a message",
        lambda s: w.headers(s, w.grpc_headers(RANGE)) + w.data(s, struct.pack(">BI", 0, 9) + b"\x0a", end=True),
        (w.INTERNAL, "grpc: the request ended inside a message"),
    ),
    (
        "no message",
        lambda s: w.headers(s, w.grpc_headers(RANGE), end=True),
        (w.INTERNAL, "grpc: a unary call without its request message"),
    ),
    (
        "an empty key",
        lambda s: w.unary(s, PUT, pb.PutRequest(value=b"v").SerializeToString()),
        (w.INVALID_ARGUMENT, "etcdserver: key is not provided"),
    ),
]


def test_bad_calls_each_get_their_grpc_status_and_the_connection_goes_on(cluster: StoreCluster) -> None:
    sids = [2 * i + 1 for i in range(len(BAD_CALLS))]
    good = 2 * len(BAD_CALLS) + 1
    with connect(cluster, generous_hello()) as conn:
        conn.send(b"".join(make(s) for s, (_, make, _) in zip(sids, BAD_CALLS, strict=True)))
        conn.send(w.unary(good, RANGE, pb.RangeRequest(key=b"nothing/here").SerializeToString()))
        a = conn.read(lambda a: all(a.status(s) is not None for s in [*sids, good]), timeout=15)
    assert a.goaway is None and not a.eof
    got = {name: a.status(s) for s, (name, _, _) in zip(sids, BAD_CALLS, strict=True)}
    assert got == {name: want for name, _, want in BAD_CALLS}
    assert a.status(good) == (w.GRPC_OK, "")
    unparsable = connect(cluster, generous_hello())
    with unparsable:
        unparsable.send(w.unary(1, RANGE, b"\xff\xff\xff"))
        status = unparsable.read(lambda a: a.status(1) is not None).status(1)
    assert status is not None and status[0] == w.INVALID_ARGUMENT
    assert status[1].startswith("grpc: error unmarshalling request: ")
    assert_serving(cluster)


def test_what_grpcio_sees_of_unknown_methods_and_oversized_requests(cluster: StoreCluster) -> None:
    identity = {"request_serializer": None, "response_deserializer": None}
    with channel(cluster) as ch:
        with pytest.raises(grpc.RpcError) as e:
            ch.unary_unary("/etcdserverpb.KV/Nope", **identity)(b"", timeout=10)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert e.value.details() == "unknown method Nope for service etcdserverpb.KV"
        put = stub(ch, "KV", "Put")
        with pytest.raises(grpc.RpcError) as e:
            put(pb.PutRequest(key=b"big", value=b"v" * GRPC_LIMIT), timeout=10)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "grpc: received message larger than max" in e.value.details()
        for txn in (
            pb.TxnRequest(success=[pb.RequestOp(request_put=pb.PutRequest(key=b"big", value=b"v" * MAX_REQUEST))]),
            pb.PutRequest(key=b"big", value=b"v" * MAX_REQUEST),
        ):
            call = stub(ch, "KV", "Txn" if isinstance(txn, pb.TxnRequest) else "Put")
            with pytest.raises(grpc.RpcError) as e:
                call(txn, timeout=10)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert e.value.details() == "etcdserver: request is too large"
        assert not stub(ch, "KV", "Range")(pb.RangeRequest(key=b"big"), timeout=10).kvs  # nothing of it was written
    assert_serving(cluster)


def test_an_oversized_message_is_dropped_as_it_comes_never_buffered(cluster: StoreCluster) -> None:
    """A client declares a 1 GiB message and sends 48 MiB of it: RESOURCE_EXHAUSTED at once,
    the bytes dropped as they come (the window given back), the member no bigger."""
    before = rss_mib(cluster)
    with connect(cluster, generous_hello()) as conn:
        conn.send(w.headers(1, w.grpc_headers(RANGE)) + w.data(1, struct.pack(">BI", 0, 1 << 30)))
        chunk = w.data(1, b"\0" * (1 << 20))
        for _ in range(48):
            conn.send(chunk)
        conn.send(w.unary(3, RANGE, A_RANGE))
        a = conn.read(lambda a: a.status(3) is not None, timeout=15)  # after all of the 48 MiB
        grown = rss_mib(cluster) - before
    status = a.status(1)
    assert status is not None and status[0] == w.RESOURCE_EXHAUSTED
    assert a.status(3) == (w.GRPC_OK, "") and a.goaway is None
    assert grown < 24, f"the member grew {grown:.0f} MiB"
    assert_serving(cluster)


# ---------------------------------------------------------------------- HTTP/2 errors


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (w.settings((w.INITIAL_WINDOW_SIZE, 1 << 31)), w.FLOW_CONTROL_ERROR),
        (w.settings((w.MAX_FRAME_SIZE, 100)), w.PROTOCOL_ERROR),
        (w.settings((w.ENABLE_PUSH, 2)), w.PROTOCOL_ERROR),
        (w.frame(w.SETTINGS, 0, 0, b"\0" * 5), w.FRAME_SIZE_ERROR),
        (w.frame(w.SETTINGS, w.ACK, 0, b"\0" * 6), w.FRAME_SIZE_ERROR),
        (w.frame(w.SETTINGS, 0, 3, b""), w.PROTOCOL_ERROR),
        (w.frame(w.PUSH_PROMISE, w.END_HEADERS, 1, b"\0\0\0\2"), w.PROTOCOL_ERROR),
        (w.frame(w.HEADERS, w.END_HEADERS, 1, b"\x80"), w.COMPRESSION_ERROR),
        (b"GET / HTTP/1.1\r\n\r\n", w.PROTOCOL_ERROR),
    ],
    ids=[
        "INITIAL_WINDOW_SIZE 2^31",
        "MAX_FRAME_SIZE 100",
        "ENABLE_PUSH 2",
        "SETTINGS of 5 bytes",
        "SETTINGS ack with a payload",
        "SETTINGS on a stream",
        "PUSH_PROMISE",
        "HPACK index 0",
        "HTTP/1.1 after ALPN h2",
    ],
)
def test_bad_frames_and_settings_get_a_goaway_with_http2s_code(cluster: StoreCluster, bad: bytes, code: int) -> None:
    first = bad if bad.startswith(b"GET") else w.hello() + bad
    with connect(cluster, first) as conn:
        a = conn.read(lambda a: a.goaway is not None, timeout=10)
        assert a.goaway is not None and a.goaway[1] == code, a.goaway
        assert conn.closed_by_server(), "the connection closes after its GOAWAY"
    assert_serving(cluster)


def test_a_continuation_flood_is_enhance_your_calm(cluster: StoreCluster) -> None:
    before = rss_mib(cluster)
    with connect(cluster) as conn:
        conn.send(w.headers(1, w.grpc_headers(RANGE), end_headers=False))
        continuation = w.frame(w.CONTINUATION, 0, 1, b"\x82" * 16_000)
        sent = 0
        while sent < 64:  # 1 MB of header block at most, frame by frame
            sent += 1
            if not conn.offer(continuation) or conn.read(lambda a: a.goaway is not None, timeout=0.05).goaway:
                break
        a = conn.read(lambda a: a.goaway is not None, timeout=10)
        assert a.goaway is not None and a.goaway[1] == w.ENHANCE_YOUR_CALM, (a.goaway, sent)
        assert sent <= 6, sent  # at 64 kB of header block
        assert conn.closed_by_server()
    assert rss_mib(cluster) - before < 16
    assert_serving(cluster)


def test_data_beyond_the_connections_flow_control_window_is_flow_control_error(cluster: StoreCluster) -> None:
    """Calls each holding most of a message not yet complete: their bytes are given back to the
    window while the connection holds under PARTIAL_LIMIT (64 MiB) of unfinished messages,
    then no more; past the 16 MiB connection window after that, a byte is FLOW_CONTROL_ERROR."""
    part = struct.pack(">BI", 0, GRPC_LIMIT) + b"\0" * (GRPC_LIMIT - (8 << 10))
    streams = (PARTIAL_LIMIT + (16 << 20)) // len(part) + 4
    with connect(cluster) as conn:
        for i in range(streams):
            frames = [w.headers(2 * i + 1, w.grpc_headers(PUT))]
            frames += [w.data(2 * i + 1, part[off : off + 16_384]) for off in range(0, len(part), 16_384)]
            if not conn.offer(b"".join(frames)) or conn.read(lambda a: a.goaway is not None, timeout=0.01).goaway:
                break
        a = conn.read(lambda a: a.goaway is not None, timeout=10)
        assert a.goaway is not None and a.goaway[1] == w.FLOW_CONTROL_ERROR, a.goaway
    assert_serving(cluster)


def test_streams_beyond_max_streams_are_refused_and_the_connection_goes_on(cluster: StoreCluster) -> None:
    base = watchers(cluster)
    with connect(cluster, generous_hello()) as conn:
        conn.send(b"".join(w.headers(2 * i + 1, w.grpc_headers(WATCH)) for i in range(1024)))
        over = 2 * 1024 + 1
        conn.send(w.unary(over, RANGE, A_RANGE))
        a = conn.read(lambda a: over in a.resets, timeout=15)
        assert a.resets.get(over) == w.REFUSED_STREAM and a.goaway is None
        conn.send(w.rst_stream(1) + w.unary(over + 2, RANGE, A_RANGE))
        a = conn.read(lambda a: a.status(over + 2) is not None, timeout=15)
        assert a.status(over + 2) == (w.GRPC_OK, "")
    assert until("the watch streams' handlers gone", lambda: watchers(cluster) == base)
    assert_serving(cluster)


def test_a_ping_flood_from_a_client_that_does_not_read_costs_bounded_memory(cluster: StoreCluster) -> None:
    """PINGs sent without reading a single answer: the member stops reading the connection once
    its answers pile up (or says ENHANCE_YOUR_CALM); its memory stays bounded, and it serves
    everyone else meanwhile."""
    before = rss_mib(cluster)
    with connect(cluster, buffers=64 << 10) as conn:
        started = time.monotonic()
        sent = conn.send_until_blocked(w.ping() * 4096, limit=256 * MIB)
        took = time.monotonic() - started
        grown = rss_mib(cluster) - before
        assert sent < 256 * MIB, "the member never stopped reading"
        assert grown < 48, f"the member grew {grown:.0f} MiB answering {sent // 17} PINGs ({took:.1f} s)"
        assert_serving(cluster)  # while the flooder holds its connection, unread
    assert_serving(cluster)


def test_half_sent_frames_are_closed_after_the_frame_timeout(cluster: StoreCluster) -> None:
    """8 connections each announce a 1 MiB frame and send half of it: held for ever, they used
    to cost a member 8 MiB (1 MiB a connection, for as many connections as it takes) for
    nothing; now each goes after frame_timeout."""
    conns = [connect(cluster) for _ in range(8)]
    try:
        started = time.monotonic()
        for c in conns:
            c.send(w.data(1, b"\0" * MIB)[: MIB // 2])
        for c in conns:
            a = c.read(lambda a: a.goaway is not None, timeout=10)
            assert a.goaway is not None and a.goaway[1] == w.PROTOCOL_ERROR, a.goaway
            assert b"not complete" in a.goaway[2]
            assert c.closed_by_server()
        took = time.monotonic() - started
        assert 1.5 < took < 8, took
    finally:
        for c in conns:
            c.close()
    assert_serving(cluster)


# ---------------------------------------------------------------------- watches


def test_a_stream_holds_at_most_max_watches_per_connection(cluster: StoreCluster) -> None:
    base = watchers(cluster)
    with connect(cluster, generous_hello()) as conn:
        got = open_watches(conn, 1, MAX_WATCHES_PER_CONNECTION)
        assert {r.watch_id for r in got} == set(range(MAX_WATCHES_PER_CONNECTION))
        assert watchers(cluster) == base + MAX_WATCHES_PER_CONNECTION
        conn.send(w.data(1, watch_create(b"one/more")))
        a = conn.read(lambda a: len(a.messages(1)) > MAX_WATCHES_PER_CONNECTION, timeout=15)
        refused = pb.WatchResponse.FromString(a.messages(1)[-1])  # etcd's one response: created and canceled
        assert refused.created and refused.canceled and refused.watch_id == -1
        assert refused.cancel_reason == (
            f"etcdserver: this connection holds {MAX_WATCHES_PER_CONNECTION} watches, the most allowed"
        )
        assert watchers(cluster) == base + MAX_WATCHES_PER_CONNECTION
        conn.send(w.rst_stream(1))
        assert until("the stream's watches released", lambda: watchers(cluster) == base, wait=30)
    assert_serving(cluster)


def test_the_members_watch_limit_holds_for_etcd_clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MAX_WATCHES (200,000) made 5 and MAX_WATCHES_PER_CONNECTION 3, in a member in this
    process: a create past either limit is etcd's created-then-canceled with the reason, and
    the stream goes on.  The connection's limit counts the watches of all its Watch calls
    (a client cannot pass it by opening more streams)."""
    from store.server import watch_streams
    from tests.support.inprocess import inprocess_cluster

    monkeypatch.setattr(watch_streams, "MAX_WATCHES", 5)
    monkeypatch.setattr(watch_streams, "MAX_WATCHES_PER_CONNECTION", 3)

    def watch_call(conn: RawH2, sid: int, *keys: bytes) -> None:
        conn.send(w.headers(sid, w.grpc_headers(WATCH)) + w.data(sid, b"".join(watch_create(k) for k in keys)))

    def responses(a: Any, sid: int) -> list[Any]:
        return [pb.WatchResponse.FromString(m) for m in a.messages(sid)]

    def clients(port: int, tls: ssl.SSLContext) -> list[list[Any]]:
        with RawH2.connect(port, tls, generous_hello()) as one:
            watch_call(one, 1, b"a0", b"a1")
            watch_call(one, 3, b"b0", b"b1")
            a = one.read(lambda a: len(a.messages(1)) >= 2 and len(a.messages(3)) >= 2, timeout=10)
            with RawH2.connect(port, tls, generous_hello()) as other:
                watch_call(other, 1, b"c0", b"c1", b"c2")
                b = other.read(lambda b: len(b.messages(1)) >= 3, timeout=10)
            return [responses(a, 1), responses(a, 3), responses(b, 1)]

    async def go() -> list[list[Any]]:
        async with inprocess_cluster(tmp_path, members=1) as c:
            tls = c.local.client_tls()
            assert tls is not None
            tls.set_alpn_protocols(["h2"])
            return await asyncio.to_thread(clients, split_url(c.local.client_urls()[0])[1], tls)

    first, second, other = asyncio.run(asyncio.wait_for(go(), 60))

    def watching(got: list[Any]) -> list[int]:
        return sorted(r.watch_id for r in got if r.created and r.watch_id >= 0)

    def refused(got: list[Any]) -> list[str]:
        return [r.cancel_reason for r in got if r.created and r.canceled and r.watch_id == -1]

    # A refusal is answered at once, the creates from the next dispatch round: in any order.
    assert (watching(first), refused(first)) == ([0, 1], [])
    assert watching(second) == [0]
    assert refused(second) == ["etcdserver: this connection holds 3 watches, the most allowed"]
    assert watching(other) == [0, 1]
    assert refused(other) == ["etcdserver: this member holds 5 watches, the most allowed"]


ENDINGS: list[tuple[str, bytes]] = [
    ("an unparsable request", w.data(1, w.grpc_message(b"\xff\xff"))),
    ("a request over the limit", w.data(1, struct.pack(">BI", 0, GRPC_LIMIT + 1))),
    ("a compressed request", w.data(1, w.grpc_message(b"", compressed=True))),
    ("DATA after END_STREAM", w.data(1, b"", end=True) + w.data(1, watch_create(b"late"))),
    ("RST_STREAM", w.rst_stream(1)),
]


@pytest.mark.parametrize("ending", [e for _, e in ENDINGS], ids=[n for n, _ in ENDINGS])
def test_the_watches_of_a_call_end_with_it_however_it_ends(cluster: StoreCluster, ending: bytes) -> None:
    """A Watch call that failed (or that the client reset after its END_STREAM) used to leave its
    watches registered for ever, held and counted against the member's MAX_WATCHES."""
    base = watchers(cluster)
    with connect(cluster, generous_hello()) as conn:
        open_watches(conn, 1, 200)
        assert watchers(cluster) == base + 200
        conn.send(ending)
        assert until("the call's watches released", lambda: watchers(cluster) == base, wait=10)
        conn.send(w.unary(3, RANGE, A_RANGE))
        assert conn.read(lambda a: a.status(3) is not None).status(3) == (w.GRPC_OK, "")
    assert_serving(cluster)


def _flood_until_reset(
    conn: RawH2, sid: int, message: bytes, batches: int, per_batch: int = 2000
) -> tuple[w.Answers, int]:
    """Send `message` `per_batch` at a time on stream `sid`, reading everything that comes back but
    never giving a window, until the stream is reset (or `batches` went): the batches the member
    had read by then.  A PING follows each batch and the next waits for its ACK, which the member
    sends only once it has read the batch before it: the count is then what the member took in
    before it reset the stream, however fast it reads, not how far a client got ahead of a slow
    one (with a fixed wait between batches, a loaded machine counted 46 where the member needs 7)."""
    batch = w.data(sid, message * per_batch)
    for i in range(batches):
        opaque = i.to_bytes(8, "big")
        conn.send(batch + w.ping(opaque))
        a = conn.read(lambda a, o=opaque: sid in a.resets or a.goaway is not None or _pong(a, o), timeout=10)
        if sid in a.resets or a.goaway is not None or a.eof:
            return a, i + 1
        assert _pong(a, opaque), f"no PING ACK within 10 s after batch {i + 1}"
    return conn.read(lambda a: sid in a.resets, timeout=5), batches


def _pong(a: w.Answers, opaque: bytes) -> bool:
    return any(f.flags & w.ACK and f.payload == opaque for f in a.of(w.PING))


def test_a_lease_keepalive_stream_whose_client_never_reads_is_reset(cluster: StoreCluster) -> None:
    """Keep-alives sent, their answers never taken (no WINDOW_UPDATE): the answers used to pile
    up without bound (80 bytes of member memory per keep-alive).  The stream is reset with
    ENHANCE_YOUR_CALM once 64 KiB wait; the lease lives on, and so does the connection."""
    with channel(cluster) as ch:
        lease = stub(ch, "Lease", "LeaseGrant")(pb.LeaseGrantRequest(TTL=60), timeout=10).ID
    before = rss_mib(cluster)
    with connect(cluster) as conn:
        conn.send(w.headers(1, w.grpc_headers(KEEPALIVE)))
        a, batches = _flood_until_reset(
            conn, 1, w.grpc_message(pb.LeaseKeepAliveRequest(ID=lease).SerializeToString()), 100
        )
        assert a.resets.get(1) == w.ENHANCE_YOUR_CALM, (a.resets, batches)
        assert batches <= 3, batches  # 64 KiB of answers beyond the first window: 2 batches of 2,000
        conn.send(w.window_update(0, 1 << 20) + w.unary(3, RANGE, A_RANGE))
        assert conn.read(lambda a: a.status(3) is not None).status(3) == (w.GRPC_OK, "")
    assert rss_mib(cluster) - before < 24
    with channel(cluster) as ch:
        ttl = stub(ch, "Lease", "LeaseTimeToLive")(pb.LeaseTimeToLiveRequest(ID=lease), timeout=10).TTL
    assert ttl > 0
    assert_serving(cluster)


def test_a_watch_stream_flooded_with_refused_creates_and_never_read_is_reset(cluster: StoreCluster) -> None:
    """Refused creates (an empty range) are answered at once, outside the hub's pausing: a
    client that sends them and never reads used to grow the member without bound."""
    base = watchers(cluster)
    with connect(cluster) as conn:
        conn.send(w.headers(1, w.grpc_headers(WATCH)))
        a, batches = _flood_until_reset(conn, 1, watch_create(b"b", b"a"), 100, per_batch=10_000)
        assert a.resets.get(1) == w.ENHANCE_YOUR_CALM, (a.resets, batches)
        assert batches <= 10, batches  # 4 MiB of refusals (about 60 bytes each): 7 batches of 10,000
    assert watchers(cluster) == base
    assert_serving(cluster)


def test_watch_streams_that_never_read_are_paused_cost_bounded_memory_and_catch_up(cluster: StoreCluster) -> None:
    """10 Watch streams on one connection whose client takes nothing (no WINDOW_UPDATE: 64 KiB
    of answers in all) while 8 MiB of events come: each stream holds about 2 MiB unsent
    (watch_backlog_limit / 2, then it is paused), not the 8 MiB (80 MiB in all).  Once the
    client reads, every event arrives, in order.  (One stream reads at the end, the others
    are reset: watch_streams counts each stream's backlog with the connection's shared unsent
    bytes, so several streams catching up at once can pass watch_backlog_limit together and
    have a reading connection cut off.)"""
    streams = [2 * i + 1 for i in range(10)]
    values, size = 256, 32 << 10
    base = watchers(cluster)
    with connect(cluster) as conn:
        for s in streams:
            conn.send(w.headers(s, w.grpc_headers(WATCH)) + w.data(s, watch_create(b"slow/", b"slow0")))
        assert until("the watches created", lambda: watchers(cluster) == base + len(streams))
        before = rss_mib(cluster)
        with channel(cluster) as ch:
            put = stub(ch, "KV", "Put")
            revisions = [
                put(pb.PutRequest(key=b"slow/%03d" % i, value=bytes([48 + i % 10]) * size), timeout=10).header.revision
                for i in range(values)
            ]
        grown = rss_mib(cluster) - before
        # 8 MiB stored (about twice that in the member: its log and its store) and 10 x 2 MiB
        # queued; unbounded it would be 10 x 8 MiB queued.
        assert grown < 64, f"the member grew {grown:.0f} MiB for 8 MiB of events to 10 streams that do not read"
        conn.send(b"".join(w.rst_stream(s) for s in streams[1:]))
        conn.send(w.window_update(0, 1 << 30) + w.window_update(1, 1 << 30))

        def events(a: w.Answers) -> list[Any]:
            return [e for m in a.messages(1) for e in pb.WatchResponse.FromString(m).events]

        a = conn.read(lambda a: len(events(a)) >= values, timeout=30)
        got = events(a)
        assert [e.kv.key for e in got] == [b"slow/%03d" % i for i in range(values)]
        assert [e.kv.mod_revision for e in got] == revisions
        assert a.goaway is None and not a.eof
    assert until("the watches released", lambda: watchers(cluster) == base)
    assert_serving(cluster)


# ---------------------------------------------------------------------- without TLS


def test_without_tls_the_preface_picks_the_etcd_api_and_a_bad_or_stalled_one_is_closed(tmp_path: Path) -> None:
    """On an insecure cluster the first bytes tell the protocols apart ("PRI " is HTTP/2's
    preface): a wrong preface gets GOAWAY PROTOCOL_ERROR, one left half-sent is closed after
    frame_timeout, and etcd and our own clients are served beside them."""
    with running_cluster(tmp_path, members=1, insecure=True, frame_timeout=1.0) as tc:
        p = port(tc)
        with RawH2.connect(p, None, b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n") as bad:
            a = bad.read(lambda a: a.goaway is not None)
            assert a.goaway is not None and a.goaway[1] == w.PROTOCOL_ERROR
        with RawH2.connect(p, None, w.PREFACE[:10]) as stalled:
            started = time.monotonic()
            assert stalled.closed_by_server(timeout=10)
            assert 0.5 < time.monotonic() - started < 8
        with RawH2.connect(p, None) as good:
            good.send(w.unary(1, PUT, pb.PutRequest(key=b"plain", value=b"text").SerializeToString()))
            assert good.read(lambda a: a.status(1) is not None).status(1) == (w.GRPC_OK, "")
        with grpc.insecure_channel(f"127.0.0.1:{p}") as ch:
            got = stub(ch, "KV", "Range")(pb.RangeRequest(key=b"plain"), timeout=10)
            assert [kv.value for kv in got.kvs] == [b"text"]

        async def ours() -> list[bytes]:
            async with tc.client(timeout=10) as c:
                return [kv.value for kv in (await c.get(b"plain")).kvs]

        assert asyncio.run(ours()) == [b"text"]


# ---------------------------------------------------------------------- big messages on many streams


def test_large_messages_sent_round_robin_on_many_streams_all_complete(cluster: StoreCluster) -> None:
    """grpc-go writes big messages of many calls round-robin in 16 KiB frames: the halves
    together pass the 16 MiB connection window, and every call still completes (the window is
    given back as bytes arrive, under PARTIAL_LIMIT)."""
    size = 740 << 10
    msg = struct.pack(">BI", 0, size) + b"\0" * size
    sids = [2 * i + 1 for i in range(24)]
    with connect(cluster, generous_hello()) as conn:
        conn.send(b"".join(w.headers(s, w.grpc_headers(PUT)) for s in sids))
        window, sent = 16 << 20, dict.fromkeys(sids, 0)
        deadline = time.monotonic() + 10
        while any(n < len(msg) for n in sent.values()) and time.monotonic() < deadline:
            for s in sids:
                n = min(16_384, len(msg) - sent[s], window)
                if n > 0:
                    conn.send(w.data(s, msg[sent[s] : sent[s] + n], end=sent[s] + n == len(msg)))
                    sent[s] += n
                    window -= n
            if window <= 0:
                before = len(conn.answers.of(w.WINDOW_UPDATE))

                def updated(a: w.Answers, seen: int = before) -> bool:
                    return len(a.of(w.WINDOW_UPDATE)) > seen

                a = conn.read(updated, timeout=1)
                window += sum(struct.unpack(">I", f.payload)[0] for f in a.of(w.WINDOW_UPDATE)[before:] if f.sid == 0)
                if len(a.of(w.WINDOW_UPDATE)) == before:
                    break
        a = conn.read(lambda a: all(a.status(s) is not None for s in sids), timeout=1)
    assert all(a.status(s) is not None for s in sids), sum(sent.values())


# ---------------------------------------------------------------------- fuzz (last: it writes anything)

ALL_METHODS = [m for methods in SERVICES.values() for m in methods.values()]
UNARY = {m.path for m in ALL_METHODS if not (m.client_streaming or m.server_streaming)}
HARMLESS = sorted(
    m.path for m in ALL_METHODS if not m.path.endswith(("/MemberRemove", "/MoveLeader", "/Compact", "/Snapshot"))
)
"""Every method but those that could change the cluster for good (or stream a backup)."""


@pytest.mark.parametrize("path", HARMLESS)
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(body=st.binary(max_size=64), end=st.booleans())
def test_fuzz_any_message_body_gets_a_status_or_an_answer_and_other_calls_go_on(
    cluster: StoreCluster, path: str, body: bytes, end: bool
) -> None:
    """Arbitrary bytes as the request of each etcd method: a gRPC status (never INTERNAL or
    UNKNOWN: those are bugs) or an answer, and the call beside it on the connection is served."""
    unary = path in UNARY
    with connect(cluster, generous_hello()) as conn:
        conn.send(w.headers(1, w.grpc_headers(path)) + w.data(1, w.grpc_message(body), end=end))
        conn.send(w.unary(3, RANGE, A_RANGE))
        a = conn.read(lambda a: a.status(3) is not None and (a.status(1) is not None or not unary), timeout=10)
        assert a.goaway is None and not a.eof
        assert a.status(3) == (w.GRPC_OK, ""), a.status(3)
        status = a.status(1)
        assert status is not None or not unary, (path, body)
        if status is not None:
            assert status[0] not in (w.INTERNAL, 2), (path, body, status)  # 2: UNKNOWN


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(frames=st.lists(w.frames([RANGE, WATCH, KEEPALIVE]), max_size=10))
def test_fuzz_any_frame_sequence_is_answered_or_goes_away_and_a_fresh_connection_works(
    cluster: StoreCluster, frames: list[bytes]
) -> None:
    with connect(cluster) as conn:
        conn.send(b"".join(frames) + w.ping(b"fuzzdone"))
        a = conn.read(lambda a: a.goaway is not None or any(f.payload == b"fuzzdone" for f in a.of(w.PING)), timeout=10)
        assert a.goaway is not None or any(f.payload == b"fuzzdone" for f in a.of(w.PING)) or a.eof
        if a.goaway is not None:
            assert a.goaway[1] in (
                w.PROTOCOL_ERROR,
                w.FLOW_CONTROL_ERROR,
                w.FRAME_SIZE_ERROR,
                w.COMPRESSION_ERROR,
                w.ENHANCE_YOUR_CALM,
            ), a.goaway
    with connect(cluster) as fresh:
        fresh.send(w.unary(1, RANGE, A_RANGE))
        assert fresh.read(lambda a: a.status(1) is not None).status(1) == (w.GRPC_OK, "")


def test_after_the_fuzz_the_member_serves(cluster: StoreCluster) -> None:
    assert_serving(cluster)
    with socket.create_connection(("127.0.0.1", port(cluster)), timeout=5):
        pass
