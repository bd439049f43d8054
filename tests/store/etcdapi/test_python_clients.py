"""A Python etcd client from PyPI, unchanged, on a raftkube store: aetcd (the maintained async
client; it speaks plaintext gRPC only, so the cluster here runs without TLS and the member
tells its connections apart by the HTTP/2 preface).  Keys, ranges, deletes, a txn, a lease
that keeps a key and takes it when revoked, a watch that sees a put, compaction's error,
member status — through a follower as well as the leader."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.support.cluster import StoreCluster, running_cluster

aetcd = pytest.importorskip("aetcd")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    with running_cluster(tmp_path_factory.mktemp("aetcd"), insecure=True) as c:
        yield c


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _run(coro: object) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_aetcd_works_unchanged(cluster: StoreCluster, role: str) -> None:
    leader = cluster.wait_leader()
    member = leader if role == "leader" else next(m for m in (1, 2, 3) if m != leader)
    port = _port(cluster.endpoint(member))
    p = f"/{role}/".encode()

    async def go() -> None:
        async with aetcd.Client(host="127.0.0.1", port=port, timeout=10) as c:
            put = await c.put(p + b"a", b"1")
            assert put.header.revision > 0
            got = await c.get(p + b"a")
            assert got is not None and got.value == b"1" and got.version == 1
            await c.put(p + b"b", b"2")
            assert [kv.key for kv in await c.get_prefix(p)] == [p + b"a", p + b"b"]
            assert [kv.key for kv in await c.get_prefix(p, sort_order="descend")] == [p + b"b", p + b"a"]
            deleted = await c.delete(p + b"b", prev_kv=True)
            assert deleted.deleted == 1 and deleted.prev_kv is not None and deleted.prev_kv.value == b"2"

            t = c.transactions
            ok = await c.transaction(
                compare=[t.value(p + b"a") == b"1"], success=[t.put(p + b"t", b"yes")], failure=[t.put(p + b"t", b"no")]
            )
            assert ok[0] is True
            assert (await c.get(p + b"t")).value == b"yes"

            lease = await c.lease(30)
            await c.put(p + b"leased", b"v", lease=lease)
            assert 0 < await lease.remaining_ttl() <= 30 and await lease.granted_ttl() == 30
            assert await lease.keys() == [p + b"leased"]
            await lease.refresh()  # a keep-alive: on a follower, relayed to the leader
            await lease.revoke()
            assert await c.get(p + b"leased") is None

            watch = await c.watch(p + b"w", prev_kv=True)
            seen: list[bytes] = []

            async def first_event() -> None:
                async for event in watch:
                    seen.append(event.kv.value)
                    return

            waiter = asyncio.create_task(first_event())
            await asyncio.sleep(0.2)
            await c.put(p + b"w", b"watched")
            await asyncio.wait_for(waiter, 10)
            assert seen == [b"watched"]
            await watch.cancel()

            head = (await c.put(p + b"c", b"x")).header.revision
            await c.compact(head)
            old = await c.watch(p + b"c", start_revision=head - 1)  # history before the compaction
            with pytest.raises(aetcd.exceptions.RevisionCompactedError):
                async for _ in old:
                    break
            status = await c.status()
            assert status.version.startswith("3.") and status.leader is not None

    _run(go())
