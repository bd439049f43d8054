"""The store as users run it: member processes, real sockets, real fsync, real failures."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from store.api import errors as E
from store.api.kv import Compare, CompareResult, CompareTarget, PutRequest, RangeRequest, TxnRequest
from store.api.protocol import split_url
from tests.support.cluster import StoreCluster, running_cluster
from tests.support.paths import ROOT


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    with running_cluster(tmp_path_factory.mktemp("store"), snapshot_count=200, snapshot_catchup_entries=50) as tc:
        yield tc


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_write_on_one_member_is_read_on_every_member(cluster: StoreCluster) -> None:
    """A put acknowledged by the cluster is visible to a linearizable read on each member."""

    async def go() -> list[bytes]:
        async with cluster.client() as c:
            put = await c.put(b"e2e/a", b"1")
            values = []
            for ep in cluster.endpoints:
                async with cluster.client([ep]) as one:
                    r = await one.range(RangeRequest(b"e2e/a"))
                    assert r.revision >= put.revision
                    values.append(r.kvs[0].value)
            return values

    assert run(go()) == [b"1", b"1", b"1"]


def test_refused_requests_get_typed_errors_and_change_nothing(cluster: StoreCluster) -> None:
    """Each bad request is refused with its typed error; the revision does not move."""

    async def go() -> None:
        async with cluster.client() as c:
            before = (await c.get(b"e2e/none")).revision
            cases: list[tuple[type[E.StoreError], object]] = [
                (E.KeyEmptyError, c.put(b"", b"v")),
                (E.KeyEmptyError, c.get(b"")),
                (E.InvalidRangeError, c.get(b"b", b"a")),
                (E.FutureRevisionError, c.get(b"e2e/a", revision=before + 1000)),
                (E.LeaseNotFoundError, c.put(b"e2e/l", b"v", lease=12345)),
                (E.LeaseNotFoundError, c.lease_revoke(12345)),
                (E.RequestTooLargeError, c.put(b"e2e/big", b"x" * (1_572_864 + 10))),
                (E.TooManyOpsError, c.txn(TxnRequest(success=[PutRequest(b"t%d" % i, b"v") for i in range(129)]))),
                (E.DuplicateKeyError, c.txn(TxnRequest(success=[PutRequest(b"d", b"1"), PutRequest(b"d", b"2")]))),
                (E.MemberNotFoundError, c.member_remove(99)),
                (E.FutureRevisionError, c.compact(before + 1000)),
            ]
            for err, coro in cases:
                with pytest.raises(err):
                    await coro  # type: ignore[misc]
            after = (await c.get(b"e2e/none")).revision
            assert after == before

    run(go())


def test_compacted_revision_is_refused(cluster: StoreCluster) -> None:
    """Reads below the compaction point get CompactedError carrying the compact revision."""

    async def go() -> None:
        async with cluster.client() as c:
            r1 = await c.put(b"e2e/c", b"1")
            await c.put(b"e2e/c", b"2")
            await c.compact(r1.revision + 1)
            with pytest.raises(E.CompactedError) as err:
                await c.get(b"e2e/c", revision=r1.revision)
            assert err.value.compact_revision == r1.revision + 1
            with pytest.raises(E.CompactedError):
                await c.compact(r1.revision)

    run(go())


def test_txn_compare_and_swap(cluster: StoreCluster) -> None:
    """A txn on mod_revision succeeds once and fails for a stale revision."""

    async def go() -> None:
        async with cluster.client() as c:
            r = await c.put(b"e2e/cas", b"v1")
            cas = TxnRequest(
                compare=[Compare(CompareResult.EQUAL, CompareTarget.MOD, b"e2e/cas", r.revision)],
                success=[PutRequest(b"e2e/cas", b"v2")],
                failure=[RangeRequest(b"e2e/cas")],
            )
            ok = await c.txn(cas)
            assert ok.succeeded and ok.revision == r.revision + 1
            stale = await c.txn(cas)
            assert not stale.succeeded and stale.revision == ok.revision

    run(go())


def _garbage(addr: str, payload: bytes) -> bytes:
    host, port = split_url(addr)
    with socket.create_connection((host, port), timeout=2) as s:
        s.sendall(payload)
        s.settimeout(2)
        try:
            return s.recv(4096)
        except (TimeoutError, ConnectionResetError):
            return b""


def test_garbage_on_client_and_peer_ports_closes_only_that_connection(cluster: StoreCluster) -> None:
    """Garbage bytes: the member closes the connection and keeps serving everyone else."""
    m = cluster.local.members()[0]
    _garbage(m.client_url, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    _garbage(m.client_url, struct.pack(">I", 3) + b"\xc1\xc1\xc1")
    _garbage(m.client_url, struct.pack(">I", 0xFFFFFFF0))
    _garbage(m.peer_url, os.urandom(64))
    _garbage(m.peer_url, struct.pack(">I", 5) + b"hello")

    async def go() -> None:
        async with cluster.client([m.client_url]) as c:
            st = await c.status(m.client_url)
            assert st.healthy
            await c.put(b"e2e/after-garbage", b"ok")

    run(go())
    assert cluster.local.pid(m.id) is not None


def test_second_process_on_a_locked_data_dir_exits_naming_the_holder(cluster: StoreCluster) -> None:
    """Starting a member on a data dir in use fails with an error naming the holder's pid."""
    d = cluster.local.member_dir(1)
    proc = subprocess.run(
        [sys.executable, "-m", "store.server.main", str(d)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode != 0
    pid = cluster.local.pid(1)
    assert f"locked by pid {pid}" in proc.stderr


def test_leader_kill_then_restart_loses_nothing(cluster: StoreCluster) -> None:
    """SIGKILL the leader: a new leader takes over, every acknowledged write survives, and the
    restarted member catches up (by snapshot: it missed more than the catch-up window)."""
    leader = cluster.wait_leader()

    acked: dict[bytes, bytes] = {}

    async def write(n: int, prefix: bytes) -> int:
        async with cluster.client() as c:
            rev = 0
            for i in range(n):
                key, value = prefix + b"%04d" % i, b"v%d" % i
                rev = (await c.put(key, value)).revision
                acked[key] = value  # acknowledged: it must survive
            return rev

    run(write(20, b"e2e/before/"))
    cluster.local.kill_member(leader)
    new_leader = cluster.wait_leader(exclude=(leader,))
    assert new_leader != leader
    last = run(write(400, b"e2e/after/"))
    cluster.local.start_member(leader)
    cluster.wait_applied(int(last), [m.id for m in cluster.local.members()])  # type: ignore[arg-type]

    async def check() -> None:
        hashes = set()
        async with cluster.client() as c:
            for ep in cluster.endpoints:
                h, _, _ = await c.hash_kv(ep, int(last))  # type: ignore[arg-type]
                hashes.add(h)
            assert len(hashes) == 1, "members disagree on the key space"
        assert len(acked) == 420
        for ep in cluster.endpoints:  # each member's own copy (serializable), the restarted one too
            async with cluster.client([ep]) as c:
                held: dict[bytes, bytes] = {}
                for prefix in (b"e2e/before/", b"e2e/after/"):
                    r = await c.get(prefix, prefix=True, serializable=True)
                    held.update((kv.key, kv.value) for kv in r.kvs)
                lost = sorted(k for k in acked if held.get(k) != acked[k])
                assert not lost, f"{ep}: {len(lost)} acknowledged writes lost or changed, e.g. {lost[:3]}"
                assert held.keys() == acked.keys()

    run(check())
    log = (cluster.local.member_dir(new_leader) / "member.log").read_text()
    assert "Traceback" not in log
    # It missed more entries than the leader keeps after a snapshot: it needed one.
    metrics = _http_get(cluster, leader, "/metrics")
    assert "raftkube_snapshots_installed_total 1" in metrics


def _http_get(cluster: StoreCluster, member_id: int, path: str, expect: int = 200) -> str:
    url = next(m.http_url for m in cluster.local.members() if m.id == member_id) + path
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert resp.status == expect
            return str(resp.read().decode())
    except urllib.error.HTTPError as e:
        assert e.code == expect, f"{url}: {e.code}"
        return str(e.read().decode())


def test_health_and_metrics_endpoints(cluster: StoreCluster) -> None:
    """/health answers JSON with a leader; /metrics is Prometheus text; anything else is 404."""
    leader = cluster.wait_leader()
    health = json.loads(_http_get(cluster, leader, "/health"))
    assert health["health"] == "true" and health["leader"] == leader
    metrics = _http_get(cluster, leader, "/metrics")
    for name in (
        "raftkube_raft_term",
        "raftkube_wal_fsync_seconds_total",
        "raftkube_mvcc_db_keys",
        "raftkube_watchers",
    ):
        assert f"# TYPE {name} " in metrics
    assert "raftkube_raft_is_leader 1" in metrics
    assert "not found" in _http_get(cluster, leader, "/nope", expect=404)


def test_write_to_a_member_cut_off_from_its_quorum_fails_in_bounded_time(cluster: StoreCluster) -> None:
    """With the other members paused, a write is refused (no leader / timeout) within the
    request timeout, and succeeds again once they resume."""
    leader = cluster.wait_leader()
    others = [m.id for m in cluster.local.members() if m.id != leader]
    for o in others:
        cluster.local.signal_member(o, signal.SIGSTOP)
    try:

        async def go() -> float:
            async with cluster.client([cluster.endpoint(leader)], timeout=8.0) as c:
                t0 = time.monotonic()
                with pytest.raises((E.TimeoutError_, E.NoLeaderError, E.NotLeaderError, E.LeaderChangedError)):
                    await c.put(b"e2e/cut-off", b"v")
                return time.monotonic() - t0

        elapsed = run(go())
        assert float(elapsed) < 8.0  # type: ignore[arg-type]
    finally:
        for o in others:
            cluster.local.signal_member(o, signal.SIGCONT)
    cluster.wait_leader()

    async def after() -> None:
        async with cluster.client(timeout=10.0) as c:
            await c.put(b"e2e/healed", b"v")

    run(after())


def test_watch_resumes_on_another_member_without_gaps(cluster: StoreCluster) -> None:
    """A watcher whose member dies continues on another one from the next revision."""
    cluster.wait_leader()

    async def go() -> list[int]:
        first = cluster.local.members()[0]
        eps = [first.client_url] + [e for e in cluster.endpoints if e != first.client_url]
        async with cluster.client(eps) as c:
            w = c.watch(b"e2e/w/", prefix=True)
            it = w.__aiter__()
            created = await it.__anext__()
            assert created.created
            seen: list[int] = []
            async with cluster.client() as writer:
                for i in range(5):
                    await writer.put(b"e2e/w/%d" % i, b"v")
                while len(seen) < 5:
                    resp = await asyncio.wait_for(it.__anext__(), 5)
                    seen += [e.kv.mod_revision for e in resp.events]
                watched = w._conn.endpoint if w._conn else ""
                victim = next(m.id for m in cluster.local.members() if m.client_url == watched)
                await asyncio.to_thread(cluster.local.kill_member, victim)
                for i in range(5, 10):
                    for _ in range(50):
                        try:
                            await writer.put(b"e2e/w/%d" % i, b"v")
                            break
                        except (E.NoLeaderError, E.UnavailableError, E.TimeoutError_, E.LeaderChangedError):
                            await asyncio.sleep(0.1)
                while len(seen) < 10:
                    resp = await asyncio.wait_for(it.__anext__(), 10)
                    seen += [e.kv.mod_revision for e in resp.events]
            await w.cancel()
            await asyncio.to_thread(cluster.local.start_member, victim)
            return seen

    seen = run(go())
    assert seen == sorted(seen) and len(set(seen)) == len(seen) == 10  # type: ignore[arg-type]
    assert seen == list(range(seen[0], seen[0] + 10))  # type: ignore[index]
    cluster.wait_leader()


def test_lease_expiry_deletes_its_keys_and_keepalive_extends(cluster: StoreCluster) -> None:
    """Keys on an expired lease vanish in one revision; a kept-alive lease lives on."""

    async def go() -> None:
        async with cluster.client() as c:
            short = await c.lease_grant(1)
            kept = await c.lease_grant(5)
            assert short.ttl >= 1
            await c.put(b"e2e/lease/a", b"1", lease=short.id)
            await c.put(b"e2e/lease/b", b"2", lease=short.id)
            await c.put(b"e2e/lease/c", b"3", lease=kept.id)
            deadline = time.monotonic() + short.ttl + 5
            while time.monotonic() < deadline:
                await c.lease_keepalive(kept.id)
                r = await c.get(b"e2e/lease/", prefix=True)
                if [kv.key for kv in r.kvs] == [b"e2e/lease/c"]:
                    break
                await asyncio.sleep(0.2)
            else:
                raise AssertionError("lease did not expire within its TTL + 5 s")
            ttl = await c.lease_ttl(short.id)
            assert ttl.ttl == -1
            alive = await c.lease_ttl(kept.id, keys=True)
            assert alive.ttl > 0 and alive.keys == [b"e2e/lease/c"]
            with pytest.raises(E.LeaseNotFoundError):
                await c.lease_keepalive(short.id)
            await c.lease_revoke(kept.id)

    run(go())


def test_progress_notification_reports_current_revision(cluster: StoreCluster) -> None:
    """A progress request on an idle watch yields a bookmark at the store's revision."""

    async def go() -> None:
        async with cluster.client() as c:
            rev = (await c.put(b"e2e/p/x", b"1")).revision
            w = c.watch(b"e2e/p/other", start_revision=rev + 1)
            it = w.__aiter__()
            assert (await it.__anext__()).created
            await w.progress()
            bookmark = await asyncio.wait_for(it.__anext__(), 5)
            assert bookmark.is_progress_notify and bookmark.revision >= rev
            await w.cancel()

    run(go())
