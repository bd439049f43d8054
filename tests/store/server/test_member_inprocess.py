"""Member logic in-process: three members in this test's event loop (real sockets, files and
TLS), driven where no client can reach: entries put straight into the Raft log, and a
hand-set clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgpack
import pytest

from store.api.errors import StoreError
from store.api.protocol import ERROR, STREAM
from store.api.watch import WatchCreateRequest
from store.raft.types import ConfChange, ConfChangeType
from store.server.clock import ManualClock
from tests.support.inprocess import InProcessCluster, inprocess_cluster

BAD_ENTRIES = [
    b"",  # (an empty entry is Raft's own no-op: applied as nothing)
    b"\xc1",
    b"not msgpack",
    msgpack.packb([1, 0, "put", [b"k", None, 0, False, False, False]]),
    msgpack.packb([1, 0, "put", ["k", b"v", 0, False, False, False]]),
    msgpack.packb([1, 0, "delete_range", ["k", b"", False]]),
    msgpack.packb([1, 0, "compact", [2.5, False]]),
    msgpack.packb([1, 0, "txn", [[], [["put", [b"k", 7, 0, False, False, False]]], []]]),
    msgpack.packb([1, 0, "lease_grant", [None, None]]),
    msgpack.packb([1, 0, "who-knows", {"a": 1}]),
]


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def _hashes(c: InProcessCluster) -> set[tuple[int, int]]:
    out = set()
    for m in c.members.values():
        h, compact = m.state.kv.hash_kv()
        out.add((h, compact))
    return out


def test_entries_that_cannot_be_applied_are_refused_alike_and_every_member_keeps_serving(tmp_path: Path) -> None:
    async def go() -> None:
        async with inprocess_cluster(tmp_path) as c, c.client() as client:
            await client.put(b"known", b"1")
            leader = await c.leader()
            before = {i: m.applier.entries_refused for i, m in c.members.items()}
            leader.node.propose(list(BAD_ENTRIES))
            # Membership changes that cannot be carried out: a context that does not decode,
            # and adding member 0.  (One at a time: Raft takes one pending change.)
            for cc in (
                ConfChange(ConfChangeType.ADD_NODE, 9, b"\xc1garbage"),
                ConfChange(ConfChangeType.ADD_NODE, 0, msgpack.packb([0, 0, None])),
            ):
                leader.node.propose_conf_change(cc)
                await c.applied_everywhere(leader.node.status().last_index)
            await c.applied_everywhere(leader.node.status().last_index)
            # Every member skipped the same entries: the two without an envelope and the two
            # membership changes (the rest were refused with an answer, counted nowhere).
            refused = {i: m.applier.entries_refused - before[i] for i, m in c.members.items()}
            assert set(refused.values()) == {4}, refused
            assert len(await _hashes(c)) == 1
            for m in c.members.values():
                assert sorted(m.state.members) == [1, 2, 3]
                assert m.node.fatal is None
            # ... and the cluster goes on serving, known keys unchanged.
            r = await client.put(b"after", b"2")
            assert (await client.get(b"known")).kvs[0].value == b"1"
            await c.applied_everywhere(leader.node.status().commit)
            assert len(await _hashes(c)) == 1
            assert r.revision == (await client.get(b"after")).kvs[0].mod_revision
            # A restart replays the same entries from the WAL without trouble.
            await c.stop_member(leader.id)
            m = await c.start_member(leader.id)
            await c.leader()
            await c.applied_everywhere(m.node.status().commit)
            assert (await client.get(b"after")).kvs[0].value == b"2"

    run(go())


def test_a_malformed_entry_is_answered_to_the_member_that_proposed_it(tmp_path: Path) -> None:
    """The proposer's client gets the typed error (here a put whose value is an int that
    slipped past the edge), not a timeout."""

    async def go() -> None:
        async with inprocess_cluster(tmp_path) as c:
            leader = await c.leader()
            with_int_value = [b"k", 7, 0, False, False, False]
            try:
                await leader.proposals.propose("put", with_int_value)
            except StoreError as e:
                assert e.code == "invalid-argument" and "put.value" in e.message
            else:
                raise AssertionError("the malformed put was applied")

    run(go())


def test_leases_expire_on_the_members_clock(tmp_path: Path) -> None:
    """With a hand-set clock, a 100 s lease expires when the clock says so, not before."""
    clock = ManualClock()

    async def go() -> None:
        async with inprocess_cluster(tmp_path, clock=clock) as c, c.client() as client:
            await c.leader()
            lease = await client.lease_grant(100)
            await client.put(b"leased", b"x", lease=lease.id)
            await asyncio.sleep(0.5)  # many ticks, no time on the member's clock
            assert (await client.get(b"leased")).kvs
            clock.advance(101)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 5
            while (await client.get(b"leased")).kvs and loop.time() < deadline:
                await asyncio.sleep(0.02)
            assert not (await client.get(b"leased")).kvs
            assert lease.id not in await client.leases()

    run(go())


def test_writes_beyond_what_may_wait_to_commit_are_refused_not_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from store.server import proposals

    monkeypatch.setattr(proposals, "MAX_PENDING", 5)

    async def go() -> list[str]:
        async with inprocess_cluster(tmp_path) as c:
            leader = await c.leader()
            results: list[str] = []
            for i in range(8):  # all in one loop turn: none can commit in between
                leader.proposals.submit(
                    "put", [b"k%d" % i, b"v", 0, False, False, False], lambda r: results.append(_outcome(r))
                )
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 5
            while len(results) < 8 and loop.time() < deadline:
                await asyncio.sleep(0.01)
            return results

    results = run(go())
    assert sorted(results) == ["ok"] * 5 + ["too-many-requests"] * 3


def _outcome(result: object) -> str:
    return result.code if isinstance(result, StoreError) else "ok"


def test_watches_per_connection_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from store.server import watch_streams
    from tests.support.raw import RawConn

    monkeypatch.setattr(watch_streams, "MAX_WATCHES_PER_CONNECTION", 3)

    async def go() -> list[object]:
        async with inprocess_cluster(tmp_path, members=1) as c:
            await c.leader()
            conn = await RawConn.open(c.local.client_urls()[0], c.local.client_tls())
            try:
                req = WatchCreateRequest(b"w").to_wire()
                replies = []
                for rid in range(1, 5):
                    replies.append(await conn.call(rid, "watch", req))
                return replies
            finally:
                conn.close()

    replies = run(go())
    assert [r[1] for r in replies[:3]] == [STREAM] * 3
    assert replies[3][1] == ERROR and replies[3][2][0] == "too-many-watches", replies[3]
