"""Hostile requests against real member processes: nothing a client sends stops a member,
poisons the log, or changes what it should not.

The regressions are the issue's list of single requests that used to stop all three
members for good; the fuzz test sends arbitrary msgpack shapes for every method."""

from __future__ import annotations

import asyncio
import math
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from store.api import methods as M
from store.api.errors import StoreError
from store.api.kv import DeleteRangeRequest, PutRequest, RangeRequest, TxnRequest
from store.api.protocol import END, ERROR, OK, STREAM
from store.api.watch import WatchCreateRequest
from store.mvcc.keyrange import contains
from tests.support.cluster import StoreCluster, running_cluster
from tests.support.raw import RawConn

KNOWN = {b"known/a": b"1", b"known/b": b"2", b"known/c": b"3"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    with running_cluster(tmp_path_factory.mktemp("hostile")) as tc:

        async def seed() -> None:
            async with tc.client() as c:
                for k, v in KNOWN.items():
                    await c.put(k, v)

        asyncio.run(seed())
        yield tc


def run(coro: object) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def _known(tc: StoreCluster) -> dict[bytes, tuple[bytes, int]]:
    async with tc.client() as c:
        r = await c.get(b"known/", prefix=True)
        return {kv.key: (kv.value, kv.mod_revision) for kv in r.kvs}


def _alive(tc: StoreCluster) -> bool:
    return all(tc.local.pid(m) is not None for m in tc.local.member_ids())


PUT = PutRequest(b"k", b"v").to_wire()
WATCH = WatchCreateRequest(b"k").to_wire()
RANGE = RangeRequest(b"k").to_wire()


def _with(wire: list[Any], i: int, v: Any) -> list[Any]:
    out = list(wire)
    out[i] = v
    return out


REGRESSIONS = [
    ("put", _with(PUT, 1, None), "put.value"),
    ("put", _with(PUT, 0, "k"), "put.key"),
    ("put", _with(PUT, 1, "v"), "put.value"),
    ("delete_range", ["k", b"", False], "delete_range.key"),
    ("compact", [2.5, False], "compact.revision"),
    ("txn", [[], [["put", _with(PUT, 1, 7)]], []], "txn.success[0].put.value"),
    ("watch", _with(WATCH, 0, 7), "watch.key"),
    ("watch", _with(WATCH, 2, 2.5), "watch.start_revision"),
    ("range", _with(RANGE, 3, 1.5), "range.revision"),
    ("range", _with(RANGE, 3, math.nan), "range.revision"),
]


def test_requests_that_stopped_every_member_are_refused_naming_the_field(cluster: StoreCluster) -> None:
    async def go() -> list[Any]:
        conn = await RawConn.open(cluster.endpoints[0], cluster.tls)
        try:
            replies = []
            for i, (method, args, _) in enumerate(REGRESSIONS, start=1):
                replies.append(await conn.call(i, method, args))
            return replies
        finally:
            conn.close()

    replies = run(go())
    for (method, _, field), reply in zip(REGRESSIONS, replies, strict=True):
        assert reply[1] == ERROR, (method, reply)
        code, _message, details = reply[2]
        assert code == "invalid-argument" and details["field"] == field, reply
    # The members are alive, agree, and still take writes; after a restart of every member
    # (replaying their logs) too.
    assert _alive(cluster)

    async def write(k: bytes) -> int:
        async with cluster.client() as c:
            return (await c.put(k, b"ok")).revision

    run(write(b"after/regressions"))
    cluster.stop()
    cluster.start()
    cluster.wait_leader()
    rev = run(write(b"after/restart"))
    cluster.wait_applied(rev, cluster.local.member_ids())
    assert _alive(cluster)


def test_a_watch_with_a_bad_start_revision_does_not_stop_catch_up_for_others(cluster: StoreCluster) -> None:
    """A watch from revision 2.5 used to stop the member's history catch-up for every watcher."""

    async def go() -> int:
        conn = await RawConn.open(cluster.endpoints[0], cluster.tls)
        try:
            assert (await conn.call(1, "watch", _with(WATCH, 2, 2.5)))[1] == ERROR
        finally:
            conn.close()
        async with cluster.client([cluster.endpoints[0]]) as c:
            seen = 0
            w = c.watch(b"known/", prefix=True, start_revision=1)
            async for resp in w:
                seen += len(resp.events)
                if seen >= len(KNOWN):
                    await w.cancel()
                    break
            return seen

    assert run(asyncio.wait_for(go(), 10)) >= len(KNOWN)


# ---------------------------------------------------------------------- fuzz
wire_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.binary(max_size=12)
    | st.text(max_size=12)
    | st.sampled_from([b"known/a", b"known/", b"\0", b"k"]),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=16,
)

TEMPLATES: dict[str, list[Any]] = {
    "range": RANGE,
    "put": PUT,
    "delete_range": DeleteRangeRequest(b"k").to_wire(),
    "txn": TxnRequest([], [PutRequest(b"k", b"v")], [RangeRequest(b"k")]).to_wire(),
    "compact": [1, False],
    "lease_grant": [10, 0],
    "lease_revoke": [1],
    "lease_keepalive": [1],
    "lease_ttl": [1, False],
    "lease_leases": [],
    "status": [],
    "members": [],
    "member_add": ["m9", "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "http://127.0.0.1:3", True],
    "member_remove": [9],
    "member_promote": [9],
    "member_update": [9, "m9", "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "http://127.0.0.1:3"],
    "move_leader": [9],
    "hash_kv": [0],
    "watch": WATCH,
    "watch_cancel": [1],
    "watch_progress": [0],
    "snapshot": [],
    "hello": [7],
}
assert set(TEMPLATES) == set(M.METHODS), "every method is fuzzed"


@st.composite
def requests(draw: st.DrawFn) -> tuple[Any, Any]:
    """A method (a real one, mostly) and its arguments: a template with one field replaced,
    or any shape at all."""
    method = draw(st.sampled_from(sorted(TEMPLATES)) | st.sampled_from([None, 7, "nope", b"put", ""]))
    template = TEMPLATES.get(method) if isinstance(method, str) else None
    if template and draw(st.booleans()):
        i = draw(st.integers(0, len(template) - 1))
        return method, _with(template, i, draw(wire_values))
    return method, draw(wire_values)


def _touches_known(method: Any, args: Any) -> bool:
    """Whether the request would be carried out and could change the cluster beyond scratch
    keys: a write that reaches a known key, or a membership change."""
    m = M.METHODS.get(method) if isinstance(method, str) else None
    if m is None:
        return False
    try:
        req = m.decode_request(args)
    except StoreError:
        return False  # refused at the edge: exactly what the test wants to send
    if m in (M.MEMBER_ADD, M.MEMBER_REMOVE, M.MEMBER_PROMOTE, M.MOVE_LEADER):
        return True
    return _writes_known(req)


def _writes_known(req: Any) -> bool:
    if isinstance(req, PutRequest):
        return req.key in KNOWN
    if isinstance(req, DeleteRangeRequest):
        return any(contains(req.key, req.range_end, k) for k in KNOWN)
    if isinstance(req, TxnRequest):
        return any(_writes_known(op) for op in (*req.success, *req.failure))
    return False


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(reqs=st.lists(requests(), min_size=1, max_size=6), member=st.integers(0, 2))
def test_arbitrary_requests_get_a_typed_error_or_an_answer_and_never_stop_a_member(
    cluster: StoreCluster, reqs: list[tuple[Any, Any]], member: int
) -> None:
    for method, args in reqs:
        assume(not _touches_known(method, args))

    async def go() -> None:
        conn = await RawConn.open(cluster.endpoints[member], cluster.tls)
        try:
            for rid, (method, args) in enumerate(reqs, start=1):
                reply = await conn.call(rid, method, args, timeout=10)
                assert reply is not None, f"connection dropped without an error frame after {method!r} {args!r}"
                assert reply[0] == rid, f"not an answer to {method!r}: {reply!r}"
                kind = reply[1]
                assert kind in (OK, ERROR, STREAM, END), reply
                if kind == ERROR:
                    code, message, _details = reply[2]
                    assert isinstance(code, str) and isinstance(message, str)
                    assert code != "internal", f"{method!r} {args!r} hit a bug: {message}"
        finally:
            conn.close()

    run(go())
    assert _alive(cluster)


def test_after_the_fuzz_known_keys_are_unchanged_and_members_agree(cluster: StoreCluster) -> None:
    got = run(_known(cluster))
    assert {k: v for k, (v, _) in got.items()} == KNOWN

    async def fence() -> int:
        async with cluster.client() as c:
            return (await c.put(b"fuzz/fence", b"x")).revision

    async def hashes(rev: int) -> set[tuple[int, int]]:
        async with cluster.client() as c:
            return {(await c.hash_kv(ep, rev))[:2] for ep in cluster.endpoints}

    rev = run(fence())
    cluster.wait_applied(rev, cluster.local.member_ids())
    assert len(run(hashes(rev))) == 1
    assert _alive(cluster)


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (struct.pack(">I", 3) + b"\xc1\xc1\xc1", "undecodable frame"),
        (struct.pack(">I", 3) + b"\x92\x01\x02", "a request frame must be"),
        (struct.pack(">I", 1) + b"\x07", "a request frame must be"),
    ],
)
def test_frames_that_are_not_requests_close_the_connection_with_an_error_frame(
    cluster: StoreCluster, payload: bytes, says: str
) -> None:
    async def go() -> list[Any]:
        conn = await RawConn.open(cluster.endpoints[0], cluster.tls)
        conn.send_bytes(payload)
        frames = []
        while (f := await conn.next()) is not None:
            frames.append(f)
        return frames

    frames = run(go())
    assert len(frames) == 1 and frames[0][:2] == [0, ERROR], frames
    assert frames[0][2][0] == "protocol" and says in frames[0][2][1], frames
    assert _alive(cluster)


def test_an_oversized_request_is_refused_and_the_connection_goes_on(cluster: StoreCluster) -> None:
    """The body past the limit is skipped, never buffered; the request gets its own error."""

    async def go() -> tuple[Any, Any]:
        conn = await RawConn.open(cluster.endpoints[0], cluster.tls)
        try:
            big = await conn.call(5, "put", PutRequest(b"big", b"x" * (2 << 20)).to_wire())
            after = await conn.call(6, "range", RangeRequest(b"known/a").to_wire())
            return big, after
        finally:
            conn.close()

    big, after = run(go())
    assert big[1] == ERROR and big[2][0] == "request-too-large", big
    assert after[1] == OK
