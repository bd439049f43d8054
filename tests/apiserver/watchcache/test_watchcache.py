"""The watch cache, behaviour by behaviour, against the in-memory Storage."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.errors import StatusError
from apiserver.watchcache import INITIAL_EVENTS_END, Cacher, WatchEvent, continuation
from tests.apiserver.memstorage import MemStorage
from tests.apiserver.watchcache.cache_support import PODS, FakeClock, Fields, Labels, drain, enc, key, pod, summary


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


@asynccontextmanager
async def cache_on(store: MemStorage, **kw: Any) -> AsyncIterator[Cacher]:
    kw.setdefault("fresh_timeout", 0.2)
    kw.setdefault("retry_delay", 0.001)
    cacher = Cacher(store, PODS, **kw)
    await cacher.start()
    try:
        yield cacher
    finally:
        await cacher.stop()


async def settle(cacher: Cacher, store: MemStorage) -> None:
    for _ in range(200):
        if cacher.ready and cacher.revision >= store.revision:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"cache at {cacher.revision}, store at {store.revision}")


def names(items: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in items]


# ---- LIST ----------------------------------------------------------------------------------


def test_initial_list_is_paged_and_objects_carry_their_revision() -> None:
    async def t() -> None:
        store = MemStorage()
        revs = {}
        for i in range(7):
            revs[f"p{i}"] = await store.create(key(f"p{i}"), enc(pod(f"p{i}")))
        async with cache_on(store, list_page=3) as c:
            assert c.ready and c.revision == store.revision
            assert store.list_calls == 3
            got = await c.list(resource_version="0")
            assert names(got.items) == [f"p{i}" for i in range(7)]
            assert [o["metadata"]["resourceVersion"] for o in got.items] == [str(revs[f"p{i}"]) for i in range(7)]
            assert got.resource_version == store.revision and got.continue_token == "" and got.remaining is None

    run(t)


def test_list_filters_by_namespace_labels_and_fields_before_the_limit() -> None:
    async def t() -> None:
        store = MemStorage()
        await store.create(key("a", "ns1"), enc(pod("a", "ns1", app="web", node="n1")))
        await store.create(key("b", "ns1"), enc(pod("b", "ns1", app="db", node="n1")))
        await store.create(key("c", "ns1"), enc(pod("c", "ns1", app="web", node="n2")))
        await store.create(key("d", "ns2"), enc(pod("d", "ns2", app="web", node="n1")))
        async with cache_on(store) as c:
            assert names((await c.list(namespace="ns1")).items) == ["a", "b", "c"]
            assert names((await c.list(labels=Labels(app="web"))).items) == ["a", "c", "d"]
            assert names((await c.list(fields=Fields({"spec.nodeName": "n1"}))).items) == ["a", "b", "d"]
            got = await c.list(namespace="ns1", labels=Labels(app="web"), limit=1)
            assert names(got.items) == ["a"] and got.continue_token and got.remaining is None
            got = await c.list(namespace="ns1", labels=Labels(app="web"), limit=1, continue_token=got.continue_token)
            assert names(got.items) == ["c"] and got.continue_token == ""
            assert names((await c.list(fields=Fields({"metadata.name": "d"}))).items) == ["d"]

    run(t)


def test_pages_continue_at_the_first_pages_revision() -> None:
    async def t() -> None:
        store = MemStorage()
        for n in "abcde":
            await store.create(key(n), enc(pod(n)))
        async with cache_on(store) as c:
            first = await c.list(limit=2)
            assert names(first.items) == ["a", "b"] and first.remaining == 3
            # Changes after the first page: none of them shows on the next pages.
            await store.delete(key("c"))
            d = await store.get(key("d"))
            assert d is not None
            await store.update(key("d"), enc(pod("d", n=9)), d.revision)
            await store.create(key("cc"), enc(pod("cc")))
            await settle(c, store)
            second = await c.list(limit=2, continue_token=first.continue_token)
            assert names(second.items) == ["c", "d"] and second.remaining == 1
            assert second.items[1]["spec"]["n"] == 0
            assert second.resource_version == first.resource_version
            third = await c.list(limit=2, continue_token=second.continue_token)
            assert names(third.items) == ["e"] and third.continue_token == ""
            now = await c.list()
            assert names(now.items) == ["a", "b", "cc", "d", "e"]

    run(t)


def test_continue_token_whose_revision_left_the_window_is_410() -> None:
    async def t() -> None:
        store = MemStorage()
        for n in "abc":
            await store.create(key(n), enc(pod(n)))
        async with cache_on(store, capacity=2) as c:
            first = await c.list(limit=1)
            for i in range(3):
                await store.create(key(f"x{i}"), enc(pod(f"x{i}")))
            await settle(c, store)
            with pytest.raises(StatusError) as err:
                await c.list(limit=1, continue_token=first.continue_token)
            assert err.value.code == 410 and err.value.reason == "Expired"
            assert err.value.message.startswith("The provided continue parameter is too old")

    run(t)


def test_continue_token_whose_revision_the_storage_compacted_is_410_with_a_token_to_go_on() -> None:
    """The cache still holds the revision, but the storage compacted it: kube's continue token
    lives as long as etcd keeps its revision (e2e "API chunking ... compacted away").  The 410
    carries a token at the latest revision; following it lists the rest, now."""

    async def t() -> None:
        store = MemStorage()
        for n in "abcde":
            await store.create(key(n), enc(pod(n)))
        async with cache_on(store) as c:
            first = await c.list(limit=2)
            before = await c.list(limit=2, continue_token=first.continue_token)  # not compacted yet
            assert names(before.items) == ["c", "d"]
            await store.delete(key("c"))
            await store.create(key("dd"), enc(pod("dd")))
            await store.compact(store.revision)
            await settle(c, store)
            with pytest.raises(StatusError) as err:
                await c.list(limit=2, continue_token=first.continue_token)
            assert err.value.code == 410 and err.value.reason == "Expired"
            go_on = err.value.to_status()["metadata"]["continue"]
            assert continuation.decode(go_on) == continuation.Continue(continuation.LATEST, "default/b\x00")
            rest = await c.list(limit=2, continue_token=go_on)
            assert names(rest.items) == ["d", "dd"] and rest.remaining == 1
            assert rest.resource_version == store.revision != first.resource_version
            last = await c.list(limit=2, continue_token=rest.continue_token)
            assert names(last.items) == ["e"] and last.continue_token == ""

    run(t)


@pytest.mark.parametrize(
    "token",
    [
        "%%%",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b"[1]").decode(),
        base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": -2, "start": "a"})).decode(),
        base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": 0, "start": "a"})).decode(),
        base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": 3, "start": 5})).decode(),
        base64.urlsafe_b64encode(orjson.dumps({"v": "other", "rv": 3, "start": "a"})).decode(),
    ],
)
def test_bad_continue_tokens_are_400(token: str) -> None:
    async def t() -> None:
        async with cache_on(MemStorage()) as c:
            with pytest.raises(StatusError) as err:
                await c.list(continue_token=token)
            assert err.value.code == 400 and "continue token" in err.value.message

    run(t)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), st.binary(max_size=80).map(lambda b: base64.urlsafe_b64encode(b).decode())))
def test_continue_tokens_decode_or_are_400(text: str) -> None:
    try:
        token = continuation.decode(text)
    except StatusError as err:
        assert err.code == 400 and err.message.startswith("invalid continue token: ")
    else:
        assert token.revision > 0 and token.start
        assert continuation.decode(continuation.encode(token)) == token


def test_bad_list_arguments_are_400() -> None:
    async def t() -> None:
        async with cache_on(MemStorage()) as c:
            for kw in (
                {"resource_version": "abc"},
                {"resource_version": "-1"},
                {"resource_version": "1", "match": "Sometimes"},
                {"match": "NotOlderThan"},
                {"resource_version": "0", "match": "Exact"},
                {"limit": -1},
            ):
                with pytest.raises(StatusError) as err:
                    await c.list(**kw)
                assert err.value.code == 400, kw

    run(t)


def test_consistent_list_waits_for_the_store_revision() -> None:
    async def t() -> None:
        store = MemStorage()
        await store.create(key("a"), enc(pod("a")))
        async with cache_on(store, fresh_timeout=2) as c:
            await store.create(key("b"), enc(pod("b")))  # not yet seen by the cache (no await since)
            got = await c.list()
            assert names(got.items) == ["a", "b"] and got.resource_version == store.revision

    run(t)


def test_consistent_list_on_an_idle_resource_times_out_504_without_progress() -> None:
    async def t() -> None:
        store = MemStorage()
        async with cache_on(store, fresh_timeout=0.05) as c:
            store.bump()  # a write to another resource: no event here
            with pytest.raises(StatusError) as err:
                await c.list()
            e = err.value
            assert (e.code, e.reason) == (504, "Timeout")
            assert e.message == f"Too large resource version: {store.revision}, current: {store.revision - 1}"
            assert e.details["causes"][0]["reason"] == "ResourceVersionTooLarge"

    run(t)


def test_consistent_list_on_an_idle_resource_uses_progress_notices() -> None:
    async def t() -> None:
        store = MemStorage(progress=True)
        async with cache_on(store, fresh_timeout=1) as c:
            store.bump()
            got = await c.list()
            assert got.resource_version == store.revision == c.revision

    run(t)


def test_consistent_watch_on_an_idle_resource_starts_from_the_cache_after_the_wait() -> None:
    async def t() -> None:
        store = MemStorage()
        await store.create(key("a"), enc(pod("a")))
        async with cache_on(store, fresh_timeout=0.05) as c:
            store.bump()
            w = await c.watch()
            rb = await store.create(key("b"), enc(pod("b")))
            assert summary(await drain(w)) == [("ADDED", "a", "2"), ("ADDED", "b", str(rb))]

    run(t)


def test_not_older_than_waits_and_rv0_does_not() -> None:
    async def t() -> None:
        store = MemStorage()
        await store.create(key("a"), enc(pod("a")))
        async with cache_on(store, fresh_timeout=0.05) as c:
            r0 = await c.list(resource_version="0")
            assert r0.resource_version == c.revision
            got = await c.list(resource_version=str(c.revision), match="NotOlderThan")
            assert got.resource_version == c.revision
            with pytest.raises(StatusError) as err:
                await c.list(resource_version=str(c.revision + 5))
            assert err.value.code == 504

    run(t)


def test_exact_list_rebuilds_past_state_from_the_window() -> None:
    async def t() -> None:
        store = MemStorage()
        ra = await store.create(key("a"), enc(pod("a", n=1)))
        async with cache_on(store, capacity=3) as c:
            rb = await store.create(key("b"), enc(pod("b")))
            ra2 = await store.update(key("a"), enc(pod("a", n=2)), ra)
            await store.delete(key("b"))
            await settle(c, store)
            at = await c.list(resource_version=str(ra), match="Exact")
            assert names(at.items) == ["a"] and at.items[0]["spec"]["n"] == 1 and at.resource_version == ra
            at = await c.list(resource_version=str(rb), match="Exact")
            assert names(at.items) == ["a", "b"]
            at = await c.list(resource_version=str(ra2), match="Exact")
            assert [o["spec"]["n"] for o in at.items] == [2, 0]
            assert names((await c.list(resource_version=str(store.revision), match="Exact")).items) == ["a"]
            await store.create(key("c"), enc(pod("c")))  # evicts the oldest event from the window
            await settle(c, store)
            with pytest.raises(StatusError) as err:
                await c.list(resource_version=str(ra), match="Exact")
            assert err.value.code == 410 and err.value.message == f"too old resource version: {ra} ({rb})"

    run(t)


# ---- WATCH ---------------------------------------------------------------------------------


def test_watch_rv0_sends_initial_added_then_changes() -> None:
    async def t() -> None:
        store = MemStorage()
        await store.create(key("a"), enc(pod("a")))
        async with cache_on(store) as c:
            w = await c.watch(resource_version="0")
            rb = await store.create(key("b"), enc(pod("b")))
            got = summary(await drain(w))
            assert got == [("ADDED", "a", "2"), ("ADDED", "b", str(rb))]
            w.close()
            assert c.watcher_count == 0
            assert [e async for e in w] == []

    run(t)


def test_watch_from_rv_replays_the_window_and_410s_when_too_old() -> None:
    async def t() -> None:
        store = MemStorage()
        ra = await store.create(key("a"), enc(pod("a")))
        async with cache_on(store, capacity=2) as c:
            rb = await store.create(key("b"), enc(pod("b")))
            rc = await store.create(key("c"), enc(pod("c")))
            await settle(c, store)
            w = await c.watch(resource_version=str(ra))
            assert summary(await drain(w)) == [("ADDED", "b", str(rb)), ("ADDED", "c", str(rc))]
            rd = await store.create(key("d"), enc(pod("d")))  # evicts b
            await settle(c, store)
            assert summary(await drain(w)) == [("ADDED", "d", str(rd))]
            with pytest.raises(StatusError) as err:
                await c.watch(resource_version=str(ra))
            assert err.value.code == 410 and err.value.message == f"too old resource version: {ra} ({rb})"
            w2 = await c.watch(resource_version=str(rb))
            assert summary(await drain(w2)) == [("ADDED", "c", str(rc)), ("ADDED", "d", str(rd))]

    run(t)


def test_watch_from_a_near_future_rv_waits_for_it_and_skips_what_comes_before_it() -> None:
    async def t() -> None:
        store = MemStorage()
        async with cache_on(store, fresh_timeout=2) as c:
            opening = asyncio.create_task(c.watch(resource_version=str(store.revision + 1)))
            await asyncio.sleep(0.01)
            assert not opening.done()  # the cache has not seen that revision yet
            await store.create(key("a"), enc(pod("a")))
            rb = await store.create(key("b"), enc(pod("b")))
            w = await opening
            assert summary(await drain(w)) == [("ADDED", "b", str(rb))]

    run(t)


@pytest.mark.parametrize("initial", [None, False, True])
def test_watch_from_a_far_future_rv_is_504_too_large_resource_version(initial: bool | None) -> None:
    async def t() -> None:
        store = MemStorage()
        await store.create(key("a"), enc(pod("a")))
        async with cache_on(store, fresh_timeout=0.1) as c:
            await settle(c, store)
            with pytest.raises(StatusError) as err:
                await c.watch(resource_version="999999999999", send_initial_events=initial, allow_bookmarks=True)
            e = err.value
            assert (e.code, e.reason) == (504, "Timeout")
            assert e.message == f"Too large resource version: 999999999999, current: {store.revision}"
            assert e.details["causes"][0]["reason"] == "ResourceVersionTooLarge"
            assert e.details["retryAfterSeconds"] == 1
            assert c.watcher_count == 0

    run(t)


def test_filter_transitions_become_added_and_deleted() -> None:
    async def t() -> None:
        store = MemStorage()
        async with cache_on(store) as c:
            w = await c.watch(resource_version=str(store.revision), labels=Labels(app="web"))
            r1 = await store.create(key("a"), enc(pod("a", app="db")))
            r2 = await store.update(key("a"), enc(pod("a", app="web")), r1)
            r3 = await store.update(key("a"), enc(pod("a", app="web", n=1)), r2)
            r4 = await store.update(key("a"), enc(pod("a", app="db", n=2)), r3)
            r5 = await store.update(key("a"), enc(pod("a", app="web", n=3)), r4)
            r6 = await store.delete(key("a"))
            got = await drain(w)
            assert summary(got) == [
                ("ADDED", "a", str(r2)),
                ("MODIFIED", "a", str(r3)),
                ("DELETED", "a", str(r4)),
                ("ADDED", "a", str(r5)),
                ("DELETED", "a", str(r6.revision)),
            ]
            # stop-matching DELETED shows the old state (n=1, app=web) at the change's revision
            assert got[2].object["spec"]["n"] == 1 and got[2].object["metadata"]["labels"] == {"app": "web"}
            assert got[4].object["spec"]["n"] == 3

    run(t)


def test_node_index_delivers_moves_between_nodes() -> None:
    async def t() -> None:
        store = MemStorage()
        async with cache_on(store) as c:
            rv = str(store.revision)
            on1 = await c.watch(resource_version=rv, fields=Fields({"spec.nodeName": "n1"}))
            on2 = await c.watch(resource_version=rv, fields=Fields({"spec.nodeName": "n2"}))
            by_name = await c.watch(resource_version=rv, fields=Fields({"metadata.name": "p"}), namespace="default")
            other_ns = await c.watch(resource_version=rv, namespace="other")
            r1 = await store.create(key("p"), enc(pod("p", node="n1")))
            r2 = await store.update(key("p"), enc(pod("p", node="n2")), r1)
            await store.create(key("q"), enc(pod("q", node="n1")))
            assert [e.type for e in await drain(on1)] == ["ADDED", "DELETED", "ADDED"]
            assert summary(await drain(on2)) == [("ADDED", "p", str(r2))]
            assert [e.type for e in await drain(by_name)] == ["ADDED", "MODIFIED"]
            assert await drain(other_ns) == []

    run(t)


def test_each_event_is_encoded_once_for_all_watchers() -> None:
    async def t() -> None:
        store = MemStorage()
        async with cache_on(store) as c:
            watchers = [await c.watch(resource_version=str(store.revision)) for _ in range(5)]
            await store.create(key("a"), enc(pod("a")))
            calls = 0

            def make(e: WatchEvent) -> bytes:
                nonlocal calls
                calls += 1
                return orjson.dumps({"type": e.type, "object": e.object}) + b"\n"

            lines = set()
            for w in watchers:
                (event,) = await drain(w)
                lines.add(event.encoded("json", make))
            assert calls == 1 and len(lines) == 1

    run(t)


def test_a_slow_watcher_is_ended_with_410_and_others_go_on() -> None:
    async def t() -> None:
        store = MemStorage()
        async with cache_on(store, watcher_buffer=3) as c:
            rv = str(store.revision)
            slow = await c.watch(resource_version=rv)
            fast = await c.watch(resource_version=rv)
            seen = []
            for i in range(5):
                await store.create(key(f"p{i}"), enc(pod(f"p{i}")))
                await settle(c, store)
                seen += await drain(fast)
            assert len(seen) == 5
            got = await drain(slow)
            assert [e.type for e in got] == ["ERROR"]
            assert got[0].object["code"] == 410 and got[0].object["reason"] == "Expired"
            assert c.watcher_count == 1

    run(t)


def test_send_initial_events_ends_with_an_annotated_bookmark() -> None:
    async def t() -> None:
        store = MemStorage()
        await store.create(key("a"), enc(pod("a")))
        await store.create(key("b"), enc(pod("b", app="web")))
        async with cache_on(store) as c:
            w = await c.watch(
                resource_version="", send_initial_events=True, allow_bookmarks=True, labels=Labels(app="web")
            )
            got = await drain(w)
            assert [e.type for e in got] == ["ADDED", "BOOKMARK"]
            mark = got[1].object
            assert mark["kind"] == "Pod" and mark["apiVersion"] == "v1"
            assert mark["metadata"] == {
                "resourceVersion": str(store.revision),
                "annotations": {INITIAL_EVENTS_END: "true"},
            }
            w2 = await c.watch(resource_version="0", send_initial_events=False)
            rc = await store.create(key("c"), enc(pod("c")))
            assert summary(await drain(w2)) == [("ADDED", "c", str(rc))]

    run(t)


def test_bookmarks_follow_the_clock_and_only_when_asked() -> None:
    async def t() -> None:
        store = MemStorage()
        clock = FakeClock()
        async with cache_on(store, clock=clock, fresh_timeout=1) as c:
            with_marks = await c.watch(resource_version="0", allow_bookmarks=True)
            without = await c.watch(resource_version="0")
            await clock.advance(1.0)
            assert await drain(with_marks) == []  # nothing new since the watch started
            store.bump()
            await store.create(key("a"), enc(pod("a", ns="x")))
            await settle(c, store)
            w_ns = await c.watch(resource_version="0", allow_bookmarks=True, namespace="other")
            store.bump()
            await store.create(key("b", "x"), enc(pod("b", ns="x")))  # not for `w_ns`
            await settle(c, store)
            await clock.advance(0.5)
            assert await drain(w_ns) == []
            await clock.advance(0.5)
            got = await drain(w_ns)
            assert [(e.type, e.object["metadata"]["resourceVersion"]) for e in got] == [
                ("BOOKMARK", str(store.revision))
            ]
            assert [e.type for e in await drain(with_marks)] == ["ADDED", "ADDED"]  # bookmark not newer
            assert [e.type for e in await drain(without)] == ["ADDED", "ADDED"]

    run(t)


# ---- the feed ------------------------------------------------------------------------------


def test_a_watch_that_ends_is_resumed_without_a_gap() -> None:
    async def t() -> None:
        store = MemStorage()
        async with cache_on(store) as c:
            w = await c.watch(resource_version=str(store.revision))
            await store.create(key("a"), enc(pod("a")))
            await settle(c, store)
            store.end_watches()
            await store.create(key("b"), enc(pod("b")))
            store.fail_watches()
            await store.create(key("c"), enc(pod("c")))
            await settle(c, store)
            assert [s[1] for s in summary(await drain(w))] == ["a", "b", "c"]
            assert c.relists == 1 and store.watch_calls >= 2

    run(t)


def test_compaction_relists_and_ends_every_watch_with_410() -> None:
    async def t() -> None:
        store = MemStorage()
        await store.create(key("a"), enc(pod("a")))
        async with cache_on(store) as c:
            w = await c.watch(resource_version="0")
            await store.create(key("b"), enc(pod("b")))
            await store.delete(key("a"))
            await settle(c, store)
            assert [e.type for e in await drain(w)] == ["ADDED", "ADDED", "DELETED"]
            store.end_watches()
            await store.create(key("c"), enc(pod("c")))  # the cache misses these: only a re-list shows them
            await store.create(key("d"), enc(pod("d")))
            await store.compact(store.revision)
            await settle(c, store)
            got = await drain(w)
            assert [e.type for e in got] == ["ERROR"] and got[0].object["code"] == 410
            assert c.relists == 2
            assert names((await c.list()).items) == ["b", "c", "d"]

    run(t)


def test_not_ready_is_429_and_stop_ends_watchers() -> None:
    async def t() -> None:
        store = MemStorage()
        c = Cacher(store, PODS, fresh_timeout=0.05)
        with pytest.raises(StatusError) as err:
            await c.list(resource_version="0")
        assert err.value.code == 429
        await c.start()
        w = await c.watch(resource_version="0")
        await c.stop()
        assert not c.ready
        assert [e async for e in w] == []
        assert store.open_watches == 0

    run(t)
