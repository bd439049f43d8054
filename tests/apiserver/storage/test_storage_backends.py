"""The Storage contract, one suite for both backends, against real processes: a 3-member
raftkube store and a real etcd 3.4.  Then the raftkube backend under a leader kill: every
create either succeeded, or was refused (UnavailableError, then not stored), or is ambiguous
(AmbiguousError); none is applied twice, and creates succeed again within a bounded time.

Both systems are shared by the module, so each test works under its own key prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.resources.base import ResourceDef
from apiserver.storage import open_storage, parse_storage_url
from apiserver.storage.batches import by_revision
from apiserver.storage.etcd import EtcdStorage, progress_trusted
from apiserver.storage.etcd_client import EtcdClient, outcome
from apiserver.storage.interface import (
    AmbiguousError,
    CompactedError,
    KeyExistsError,
    KeyNotFoundError,
    Progress,
    RevisionConflictError,
    Storage,
    StorageEvent,
    Stored,
    UnavailableError,
)
from apiserver.storage.raftkube import RaftkubeStorage
from apiserver.watchcache import Cacher
from machinery.process.launch import free_ports
from tests.store.mvcc import etcd as etcd_mod
from tests.store.mvcc.etcd import Etcd, running_etcd
from tests.support.cluster import StoreCluster, running_cluster
from tests.support.paths import ROOT

T = TypeVar("T")
Factory = Callable[[], Storage]
_prefixes = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    with running_cluster(tmp_path_factory.mktemp("store")) as tc:
        yield tc


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    with running_etcd(tmp_path_factory.mktemp("etcd")) as e:
        yield e


@pytest.fixture(params=["raftkube", "etcd"])
def make(request: pytest.FixtureRequest) -> Factory:
    """A new Storage of the backend under test (one per event loop: clients belong to one)."""
    if request.param == "raftkube":
        tc: StoreCluster = request.getfixturevalue("store")
        url = "raftkube://" + ",".join(e.split("://")[-1] for e in tc.endpoints)
        return lambda: open_storage(url, tls=tc.tls)
    e: Etcd = request.getfixturevalue("etcd")
    return lambda: open_storage("etcd://" + e.url.split("://")[1], tls=None)


@pytest.fixture(params=["raftkube", "etcd"])
def make_progress(request: pytest.FixtureRequest) -> Factory:
    """As `make`, but etcd with progress forced on: the etcd 3.4.23 of the test machines is older
    than 3.4.31, whose answers the backend does not trust by default (etcd#15220, see etcd.py);
    these tests check the wire protocol and what that etcd answers in the easy cases."""
    if request.param == "raftkube":
        tc: StoreCluster = request.getfixturevalue("store")
        url = "raftkube://" + ",".join(e.split("://")[-1] for e in tc.endpoints)
        return lambda: open_storage(url, tls=tc.tls)
    e: Etcd = request.getfixturevalue("etcd")
    return lambda: EtcdStorage(EtcdClient([e.url.split("://")[1]]), progress=True)


def prefix() -> str:
    return f"/registry/t{next(_prefixes)}-{time.monotonic_ns()}/"


def run(make: Factory, body: Callable[[Storage], Awaitable[T]]) -> T:
    async def go() -> T:
        s = make()
        try:
            return await asyncio.wait_for(body(s), 20)
        finally:
            await s.close()

    return asyncio.run(go())


async def collect(watch: AsyncIterator[list[StorageEvent] | Progress], until: int) -> list[list[StorageEvent]]:
    """Batches of `watch` until one at revision `until` (bounded by the caller's timeout)."""
    out: list[list[StorageEvent]] = []
    async for batch in watch:
        if isinstance(batch, Progress):
            continue
        out.append(batch)
        if batch[-1].revision >= until:
            break
    return out


async def collect_once(s: Storage, prefix: str, start: int, until: int) -> list[list[StorageEvent]]:
    """A watch from `start`, read until `until`, then closed."""
    watch = s.watch(prefix, start)
    try:
        return await collect(watch, until)
    finally:
        await watch.aclose()  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------- the contract
def test_create_get_and_exists(make: Factory) -> None:
    p = prefix()

    async def body(s: Storage) -> None:
        rev = await s.create(p + "a", b'{"v":1}')
        assert await s.get(p + "a") == Stored(p + "a", b'{"v":1}', rev)
        with pytest.raises(KeyExistsError) as e:
            await s.create(p + "a", b"other")
        assert e.value.key == p + "a"
        assert await s.get(p + "a") == Stored(p + "a", b'{"v":1}', rev)
        assert await s.get(p + "missing") is None
        assert await s.current_revision() == rev

    run(make, body)


def test_update_conflict_carries_the_current_value(make: Factory) -> None:
    p = prefix()

    async def body(s: Storage) -> None:
        r1 = await s.create(p + "a", b"1")
        r2 = await s.update(p + "a", b"2", r1)
        assert r2 > r1
        with pytest.raises(RevisionConflictError) as e:
            await s.update(p + "a", b"3", r1)
        assert e.value.current == Stored(p + "a", b"2", r2)
        with pytest.raises(RevisionConflictError) as e:
            await s.update(p + "gone", b"x", r1)
        assert e.value.current is None
        assert await s.get(p + "a") == Stored(p + "a", b"2", r2)
        assert await s.current_revision() == r2

    run(make, body)


def test_delete_returns_the_last_value_at_the_delete_revision(make: Factory) -> None:
    p = prefix()

    async def body(s: Storage) -> None:
        with pytest.raises(KeyNotFoundError):
            await s.delete(p + "a")
        r1 = await s.create(p + "a", b"1")
        with pytest.raises(RevisionConflictError) as e:
            await s.delete(p + "a", expected_revision=r1 - 1)
        assert e.value.current == Stored(p + "a", b"1", r1)
        deleted = await s.delete(p + "a", expected_revision=r1)
        assert deleted == Stored(p + "a", b"1", r1 + 1)
        assert await s.get(p + "a") is None
        with pytest.raises(KeyNotFoundError):
            await s.delete(p + "a", expected_revision=r1)
        r3 = await s.create(p + "b", b"2")
        assert await s.delete(p + "b") == Stored(p + "b", b"2", r3 + 1)
        assert await s.current_revision() == r3 + 1

    run(make, body)


def test_list_pages_at_a_revision(make: Factory) -> None:
    p = prefix()

    async def body(s: Storage) -> None:
        revs = {}
        for name in ("a", "b", "c", "d", "e"):
            revs[name] = await s.create(p + name, name.encode())
        await s.create(p[:-1] + "x", b"sibling outside the prefix")
        at = await s.current_revision()
        await s.update(p + "b", b"changed", revs["b"])
        await s.create(p + "f", b"later")
        await s.delete(p + "a")

        keys: list[str] = []
        start = ""
        pages = 0
        while pages < 10:
            page = await s.list(p, start_key=start, limit=2, revision=at)
            pages += 1
            assert page.revision == at
            assert all(i.value == i.key[-1:].encode() and i.revision == revs[i.key[-1:]] for i in page.items)
            keys += [i.key for i in page.items]
            if not page.more:
                break
            start = page.items[-1].key + "\0"
        assert keys == [p + n for n in "abcde"] and pages == 3

        now = await s.list(p)
        assert now.revision == await s.current_revision() and not now.more
        assert [(i.key[len(p) :], i.value) for i in now.items] == [
            ("b", b"changed"),
            ("c", b"c"),
            ("d", b"d"),
            ("e", b"e"),
            ("f", b"later"),
        ]
        limited = await s.list(p, start_key=p + "d", limit=5)
        assert [i.key for i in limited.items] == [p + "d", p + "e", p + "f"] and not limited.more
        past = await s.list(p, start_key=p[:-1] + "z")
        assert past.items == [] and not past.more
        before = await s.list(p, start_key="/", limit=1)
        assert [i.key for i in before.items] == [p + "b"] and before.more

    run(make, body)


def test_watch_from_a_revision(make: Factory) -> None:
    p = prefix()

    async def body(s: Storage) -> None:
        r1 = await s.create(p + "a", b"1")
        r2 = await s.update(p + "a", b"2", r1)
        await s.create(p[:-1] + "-other", b"not watched")
        r3 = (await s.delete(p + "a")).revision
        r4 = await s.create(p + "b", b"3")
        watch = s.watch(p, r1)
        try:
            got = await collect(watch, r4)
            r5 = await s.update(p + "b", b"4", r4)
            got += await collect(watch, r5)
        finally:
            await watch.aclose()  # type: ignore[attr-defined]
        assert got == [
            [StorageEvent("put", p + "a", b"1", r1, None)],
            [StorageEvent("put", p + "a", b"2", r2, b"1")],
            [StorageEvent("delete", p + "a", b"2", r3, b"2")],
            [StorageEvent("put", p + "b", b"3", r4, None)],
            [StorageEvent("put", p + "b", b"4", r5, b"3")],
        ]

    run(make, body)


def test_compacted_revisions_are_refused(make: Factory) -> None:
    p = prefix()

    async def body(s: Storage) -> None:
        r1 = await s.create(p + "a", b"1")
        r2 = await s.update(p + "a", b"2", r1)
        r3 = await s.create(p + "b", b"3")
        await s.compact(r2)
        with pytest.raises(CompactedError):
            await collect_once(s, p, r1, r3)
        with pytest.raises(CompactedError):
            await s.list(p, revision=r1)
        page = await s.list(p, revision=r2)
        assert [(i.key, i.value) for i in page.items] == [(p + "a", b"2")]
        # (etcd also watches from the compaction point itself; the store refuses that one.)
        assert await collect_once(s, p, r3, r3) == [[StorageEvent("put", p + "b", b"3", r3, None)]]

    run(make, body)


def test_current_revision_follows_every_write(make: Factory) -> None:
    p = prefix()

    async def body(s: Storage) -> None:
        before = await s.current_revision()
        r = await s.create(p + "a", b"1")
        assert r > before and await s.current_revision() == r
        assert await s.current_revision() == r  # a read does not move it

    run(make, body)


# ---------------------------------------------------------------------------- progress
Item = list[StorageEvent] | Progress


class Reader:
    """Reads a watch item by item, keeping them all (each read bounded)."""

    def __init__(self, watch: AsyncIterator[Item]) -> None:
        self.watch = watch
        self.items: list[Item] = []
        self._first: asyncio.Task[Item] | None = None

    async def start(self) -> None:
        """Start reading: the stream opens (an asynchronous generator starts only when read), so
        a progress request from now on concerns it."""
        self._first = asyncio.ensure_future(anext(self.watch))
        for _ in range(3):
            await asyncio.sleep(0)

    async def next(self) -> Item:
        first, self._first = self._first, None
        item = await asyncio.wait_for(first if first is not None else anext(self.watch), 5)
        self.items.append(item)
        return item

    async def until(self, revision: int) -> Item:
        """Items until one at or past `revision` (a Progress, or a batch)."""
        while True:
            item = await self.next()
            if (item.revision if isinstance(item, Progress) else item[-1].revision) >= revision:
                return item

    async def close(self) -> None:
        if self._first is not None:
            self._first.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._first
        await self.watch.aclose()  # type: ignore[attr-defined]


def check_order(items: list[Item]) -> None:
    """The Protocol's promise: revisions only grow, and a Progress is newer than all before it."""
    last = 0
    for item in items:
        first = item.revision if isinstance(item, Progress) else item[0].revision
        assert first > last, f"{item} after revision {last}"
        last = item.revision if isinstance(item, Progress) else item[-1].revision


def test_request_progress_reports_an_idle_prefix(make_progress: Factory, request: pytest.FixtureRequest) -> None:
    """Writes elsewhere move the store on; the idle prefix's watch then says so when asked."""
    p = prefix()
    latencies: list[float] = []

    async def body(s: Storage) -> None:
        r = Reader(s.watch(p, await s.current_revision() + 1))
        await r.start()
        try:
            for i in range(5):
                for j in range(3):
                    await s.create(f"{p[:-1]}-other/{i}/{j}", b"x")
                target = await s.current_revision()
                t0 = time.monotonic()
                await s.request_progress()
                got = await r.next()
                latencies.append(time.monotonic() - t0)
                assert got == Progress(target)  # nothing else was written meanwhile
        finally:
            await r.close()

    run(make_progress, body)
    print(f"progress latency {request.node.callspec.id}: " + " ".join(f"{x * 1000:.1f}ms" for x in latencies))
    assert max(latencies) < 2  # bounded: one request, or a few when one went unanswered


def test_progress_never_precedes_an_event_it_covers(store: StoreCluster) -> None:
    """Write under the prefix and at once ask for progress: the event comes before any Progress
    at or past its revision, round after round.  The raftkube store only: the etcd 3.4.23 of the
    test machines breaks exactly this (etcd#15220; seen in CI), which is why the etcd backend
    does not trust its progress notifications before 3.4.31 (see etcd.py)."""
    p = prefix()
    url = "raftkube://" + ",".join(e.split("://")[-1] for e in store.endpoints)
    make_progress: Factory = lambda: open_storage(url, tls=store.tls)  # noqa: E731

    async def body(s: Storage) -> list[Item]:
        r = Reader(s.watch(p, await s.current_revision() + 1))
        await r.start()
        try:
            for i in range(10):
                rev = await s.create(f"{p}k{i}", b"v")
                await s.request_progress()
                await s.create(f"{p[:-1]}-other/{i}", b"x")
                await s.request_progress()
                assert isinstance(await r.until(await s.current_revision()), Progress)
                (at,) = [n for n, x in enumerate(r.items) if not isinstance(x, Progress) and x[0].revision == rev]
                assert not [x for x in r.items[:at] if isinstance(x, Progress) and x.revision >= rev], r.items
        finally:
            await r.close()
        return r.items

    items = run(make_progress, body)
    check_order(items)


def test_progress_under_concurrent_writes_keeps_the_order(store: StoreCluster) -> None:
    """(The raftkube store: etcd before 3.4.25 breaks this, etcd#15220.)  Writes under the prefix
    and elsewhere while progress is asked all the time: every event arrives, in order, and no
    Progress claims a revision whose event was still to come."""
    p = prefix()
    url = "raftkube://" + ",".join(e.split("://")[-1] for e in store.endpoints)

    async def body(s: Storage) -> tuple[list[Item], list[int]]:
        r = Reader(s.watch(p, await s.current_revision() + 1))
        await r.start()
        mine: list[int] = []
        done = asyncio.Event()

        async def write() -> None:
            for i in range(61):  # the last one elsewhere: only a Progress can reach it
                if i % 2:
                    mine.append(await s.create(f"{p}k{i}", b"v"))
                else:
                    await s.create(f"{p[:-1]}-other/{i}", b"x")
            done.set()

        async def ask() -> None:
            while not done.is_set():
                await s.current_revision()
                await s.request_progress()

        writer, asker = asyncio.create_task(write()), asyncio.create_task(ask())
        try:
            await asyncio.wait_for(done.wait(), 15)
            await s.request_progress()
            assert isinstance(await r.until(await s.current_revision()), Progress)
        finally:
            await asyncio.gather(writer, asker)
            await r.close()
        return r.items, mine

    items, mine = run(lambda: open_storage(url, tls=store.tls), body)
    check_order(items)
    assert [b[0].revision for b in items if not isinstance(b, Progress)] == mine
    # At least the final Progress; those asked during the writes may go unanswered (the store
    # drops a request while events are queued), so how many more arrive depends on timing.
    assert sum(isinstance(x, Progress) for x in items) >= 1


def test_etcd_progress_follows_the_members_versions(etcd: Etcd) -> None:
    """By default the etcd backend reads the members' versions and trusts progress only from
    3.4.31 / 3.5.13 on; the test machines' 3.4.23 is older: no request, no Progress."""
    ep = etcd.url.split("://")[1]
    p = prefix()

    async def body(s: Storage) -> tuple[str, bool, list[Item]]:
        assert isinstance(s, EtcdStorage)
        version = (await s.client.status(ep)).version
        r = Reader(s.watch(p, await s.current_revision() + 1))
        await r.start()
        try:
            await s.create(p[:-1] + "-other", b"x")
            await s.request_progress()
            rev = await s.create(p + "a", b"1")
            await r.until(rev)
        finally:
            await r.close()
        return version, await s.progress_supported(), r.items

    version, supported, items = run(lambda: open_storage("etcd://" + ep, tls=None), body)
    assert supported == progress_trusted(version)
    if not supported:
        assert not [x for x in items if isinstance(x, Progress)]


def test_consistent_list_of_an_idle_resource_follows_writes_elsewhere(store: StoreCluster) -> None:
    """The watch cache over the store: after writes to another resource, a consistent LIST of
    an idle one answers at once (progress), not after fresh_timeout (set high: a missing
    progress would show as a 504 after 10 s, whatever the machine's speed)."""
    n = next(_prefixes)
    idle = ResourceDef(group="", version="v1", kind="Idle", plural=f"idles{n}", singular=f"idle{n}", namespaced=False)
    url = "raftkube://" + ",".join(e.split("://")[-1] for e in store.endpoints)
    fresh_timeout = 10.0
    latencies: list[float] = []
    burst: list[float] = []

    async def body(s: Storage) -> int:
        assert isinstance(s, RaftkubeStorage)
        await s.create(idle.key(None, "only"), b'{"apiVersion":"v1","kind":"Idle","metadata":{"name":"only"}}')
        cacher = Cacher(s, idle, fresh_timeout=fresh_timeout)
        await cacher.start()
        try:
            for i in range(10):
                for j in range(3):
                    await s.create(f"/registry/busy{n}/{i}/{j}", b"{}")
                after = await s.current_revision()
                t0 = time.monotonic()
                page = await cacher.list()
                latencies.append(time.monotonic() - t0)
                assert page.resource_version >= after
                assert [o["metadata"]["name"] for o in page.items] == ["only"]
            # Many consistent LISTs at once: one request in flight for the cache's one watch.
            await s.create(f"/registry/busy{n}/burst", b"{}")
            asked = s.progress.asked
            t0 = time.monotonic()

            async def timed() -> None:
                await cacher.list()
                burst.append(time.monotonic() - t0)

            await asyncio.gather(*(timed() for _ in range(50)))
            return s.progress.asked - asked
        finally:
            await cacher.stop()

    asked = run(lambda: open_storage(url, tls=store.tls), body)
    print(
        "consistent list of an idle resource: "
        + " ".join(f"{x * 1000:.1f}ms" for x in latencies)
        + f"; 50 at once: slowest {max(burst) * 1000:.1f}ms, {asked} progress requests"
    )
    assert max(latencies) < fresh_timeout
    assert max(burst) < fresh_timeout
    assert asked <= 5


# ---------------------------------------------------------------------------- pure parts
def test_events_are_batched_by_revision() -> None:
    ev = [StorageEvent("put", k, b"", r) for k, r in (("a", 5), ("b", 5), ("c", 6), ("d", 8), ("e", 8))]
    assert by_revision(ev) == [ev[:2], ev[2:3], ev[3:]]
    assert by_revision([]) == []


def test_blanks_around_endpoints_are_allowed() -> None:
    assert parse_storage_url("etcd://a:1, b:2") == ("etcd", ["a:1", "b:2"])


@pytest.mark.parametrize(
    ("url", "bad"),
    [
        ("etcd://a:1,b c:2", "endpoint 2"),
    ],
)
def test_blank_inside_an_endpoint_is_refused(url: str, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        parse_storage_url(url)


@pytest.mark.parametrize(
    ("url", "bad"),
    [
        ("http://a:1", "'http'"),
        ("raftkube:/a:1", "no scheme"),
        ("raftkube://", "no endpoint"),
        ("etcd://a:1,b", "endpoint 2"),
        ("etcd://a:0", "endpoint 1"),
        ("raftkube://a:1/registry", "'a:1/registry'"),
        ("raftkube://user@a:1", "'user@a:1'"),
    ],
)
def test_bad_storage_urls_name_the_bad_part(url: str, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        parse_storage_url(url)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.builds(
            lambda scheme, rest: f"{scheme}://{rest}",
            st.sampled_from(["raftkube", "etcd", "http", ""]),
            st.text(alphabet="ab:/,.0123456789@[]?\u00e9 ", max_size=30),
        ),
    )
)
def test_any_storage_url_parses_or_is_a_value_error(url: str) -> None:
    try:
        scheme, endpoints = parse_storage_url(url)
    except ValueError:
        return
    assert scheme in ("raftkube", "etcd") and endpoints
    for ep in endpoints:
        host, _, port = ep.rpartition(":")
        assert host and 0 < int(port) < 65536 and not any(c.isspace() for c in ep)


def test_storage_urls() -> None:
    assert parse_storage_url("raftkube://127.0.0.1:2379,[::1]:2380") == ("raftkube", ["127.0.0.1:2379", "[::1]:2380"])
    assert parse_storage_url("etcd://localhost:2379") == ("etcd", ["localhost:2379"])


# ---------------------------------------------------------------------------- failure
@pytest.mark.parametrize("scheme", ["raftkube", "etcd"])
def test_no_reachable_member_is_unavailable_for_reads_and_writes(scheme: str) -> None:
    """Nothing listens: every request was refused before it was sent, so even a write is
    UnavailableError (503), not AmbiguousError, once the client's deadline passes."""
    (port,) = free_ports(1)
    url = f"{scheme}://127.0.0.1:{port}"

    async def body(s: Storage) -> None:
        t0 = time.monotonic()
        with pytest.raises(UnavailableError):
            await s.create("/registry/x", b"1")
        with pytest.raises(UnavailableError):
            await s.get("/registry/x")
        with pytest.raises(UnavailableError):
            await s.current_revision()
        assert time.monotonic() - t0 < 5

    run(lambda: open_storage(url, tls=None, timeout=0.5), body)


@pytest.mark.parametrize(
    ("code", "details", "expected"),
    [
        ("UNAVAILABLE", "failed to connect to all addresses; last error: Connection refused", "not-applied"),
        ("UNAVAILABLE", "etcdserver: no leader", "not-applied"),
        ("RESOURCE_EXHAUSTED", "etcdserver: too many requests", "not-applied"),
        ("UNAVAILABLE", "etcdserver: leader changed", "unknown"),
        ("UNAVAILABLE", "etcdserver: request timed out", "unknown"),
        ("UNAVAILABLE", "Socket closed", "unknown"),
        ("DEADLINE_EXCEEDED", "Deadline Exceeded", "unknown"),
        ("INVALID_ARGUMENT", "etcdserver: key is not provided", "refused"),
        ("RESOURCE_EXHAUSTED", "etcdserver: mvcc: database space exceeded", "refused"),
    ],
)
def test_etcd_errors_say_whether_the_request_was_applied(code: str, details: str, expected: str) -> None:
    assert outcome(code, details) == expected


def test_creates_through_a_leader_kill(tmp_path: Path) -> None:
    """SIGKILL the leader under 8 concurrent creators (and one watcher): each create is
    acknowledged, refused and not stored, or ambiguous; nothing is created twice; creates
    succeed again soon after the kill; the watch resumes without gap or repeat."""
    with running_cluster(tmp_path) as tc:
        leader = tc.wait_leader()
        outcomes: dict[str, Any] = {}

        async def go() -> tuple[float, list[list[StorageEvent]], int]:
            s = RaftkubeStorage(tc.client(timeout=2.0, connect_timeout=0.3))
            start = await s.current_revision()
            watch = s.watch("/load/", start + 1)
            batches: list[list[StorageEvent]] = []

            async def watcher() -> None:
                async for batch in watch:
                    if not isinstance(batch, Progress):
                        batches.append(batch)

            watching = asyncio.create_task(watcher())
            loop = asyncio.get_running_loop()
            killed_at: list[float] = []
            recovered_at: list[float] = []

            async def creator(w: int) -> None:
                for j in range(10_000):
                    key = f"/load/w{w}-{j:05d}"
                    t0 = loop.time()
                    try:
                        outcomes[key] = await s.create(key, key.encode())
                    except UnavailableError as e:
                        outcomes[key] = e
                    except AmbiguousError as e:
                        outcomes[key] = e
                    if killed_at and t0 > killed_at[0] and isinstance(outcomes[key], int) and not recovered_at:
                        recovered_at.append(loop.time())
                    if recovered_at and loop.time() > recovered_at[0] + 0.5:
                        return
                    if loop.time() - (killed_at or [t0])[0] > 8:
                        return

            async def killer() -> None:
                await asyncio.sleep(0.4)
                await asyncio.to_thread(tc.local.kill_member, leader)
                killed_at.append(loop.time())

            try:
                await asyncio.wait_for(asyncio.gather(killer(), *(creator(w) for w in range(8))), 15)
                last = max(r for r in outcomes.values() if isinstance(r, int))
                for _ in range(200):
                    if watching.done() or (batches and batches[-1][-1].revision >= last):
                        break
                    await asyncio.sleep(0.05)
                if watching.done():
                    watching.result()  # the watch's own failure, if it failed
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching
                stored = await s.client.get(b"/load/", prefix=True)
                versions = {kv.key.decode(): (kv.version, kv.mod_revision) for kv in stored.kvs}
            finally:
                await watch.aclose()  # type: ignore[attr-defined]
                await s.close()
            assert recovered_at, "no create succeeded after the kill"
            outcomes["_versions"] = versions
            return recovered_at[0] - killed_at[0], batches, last

        recovery, events, last = asyncio.run(go())
        versions: dict[str, tuple[int, int]] = outcomes.pop("_versions")

    assert recovery < 3.0, f"creates failed for {recovery:.1f}s after the leader was killed"
    acked = {k: r for k, r in outcomes.items() if isinstance(r, int)}
    refused = [k for k, r in outcomes.items() if isinstance(r, UnavailableError)]
    assert len(acked) > 50
    for k, r in acked.items():
        assert versions[k] == (1, r), f"{k} acknowledged at {r}, stored as {versions.get(k)}"
    assert not [k for k in refused if k in versions], "a create refused as unavailable was stored"
    assert all(v == 1 for v, _ in versions.values()), "a create was applied twice"
    assert set(versions) <= set(outcomes)
    # The watch saw every stored create once, in revision order, across the member's death.
    seen = [e for batch in events for e in batch]
    assert [e.revision for e in seen] == sorted({e.revision for e in seen})
    assert {e.key for e in seen} == {k for k, (_, r) in versions.items() if r <= last}


def test_etcd_watch_resumes_after_its_member_restarts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch stream dies with the member; it is re-created from one past the last
    revision delivered once the member is back (same ports, same data): no gap, no repeat."""

    with running_etcd(tmp_path) as first:
        url = "etcd://" + first.url.split("://")[1]
        p = prefix()
        later: list[Etcd] = []

        def restart() -> None:
            first.stop()
            monkeypatch.setattr(etcd_mod, "free_ports", lambda n: [first.client_port, first.peer_port])
            e = Etcd(etcd_mod.find_etcd(), tmp_path)
            later.append(e)
            e.wait_ready()

        async def body(s: Storage) -> list[list[StorageEvent]]:
            r1 = await s.create(p + "a", b"1")
            r2 = await s.create(p + "b", b"2")
            watch = s.watch(p, r1)
            try:
                got = await collect(watch, r2)
                await asyncio.to_thread(restart)
                r3 = await s.update(p + "a", b"3", r1)
                got += await collect(watch, r3)
            finally:
                await watch.aclose()  # type: ignore[attr-defined]
            assert [e.revision for b in got for e in b] == [r1, r2, r3]
            return got

        try:
            got = run(lambda: open_storage(url, tls=None), body)
        finally:
            for e in later:
                e.stop()
    assert [e.key[len(p) :] for b in got for e in b] == ["a", "b", "a"]
    assert got[-1][0].prev_value == b"1"


def test_without_grpcio_only_the_etcd_backend_is_missing() -> None:
    """grpcio is needed by the etcd backend alone, and its absence says how to install it."""
    code = (
        "import sys; sys.modules['grpc'] = None\n"
        "from apiserver.storage import open_storage\n"
        "open_storage('raftkube://127.0.0.1:1', tls=None)\n"
        "try:\n"
        "    open_storage('etcd://127.0.0.1:1', tls=None)\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert "pip install grpcio" in out.stdout, out.stdout + out.stderr
