"""Property: every watcher sees exactly what a simple model says, or a prefix of it then an ERROR.

Random writes (creates, updates, deletes), storage watches that end, fail or are compacted
away (the cache re-lists), and random watchers (namespace, label and field filters, start
revision "0" or a past one, small buffers so some overflow).  The model is the full log of
changes: a watcher that started after revision R must see, for each change after R, what its
filter makes of it (ADDED / MODIFIED / DELETED, with the start- and stop-matching transitions),
preceded for "0" by ADDED for each object matching at R; no gap, duplicate or reordering.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apiserver.errors import StatusError
from apiserver.watchcache import Cacher, CacheWatcher, WatchEvent
from machinery.objects import Obj
from tests.apiserver.memstorage import MemStorage
from tests.apiserver.watchcache.cache_support import PODS, Fields, Labels, enc, key, pod

NAMESPACES = ("ns1", "ns2")
NAMES = ("p0", "p1", "p2")
APPS = ("", "web", "db")
NODES = ("", "n1", "n2")


@dataclass
class Change:
    revision: int
    key: str
    prev: Obj | None
    new: Obj | None  # None for a delete


@dataclass
class Watch:
    watcher: CacheWatcher
    ns: str | None
    app: str | None
    node: str | None
    name: str | None
    initial: bool
    after: int  # changes after this revision are for it
    got: list[WatchEvent] = field(default_factory=list)

    def matches(self, obj: Obj) -> bool:
        meta = obj["metadata"]
        return (
            (self.ns is None or meta["namespace"] == self.ns)
            and (self.app is None or (meta.get("labels") or {}).get("app") == self.app)
            and (self.node is None or obj["spec"]["nodeName"] == self.node)
            and (self.name is None or meta["name"] == self.name)
        )


def view(obj: Obj, revision: int) -> tuple[str, str, str, int, str, str]:
    meta = obj["metadata"]
    return (
        meta["namespace"],
        meta["name"],
        str(revision),
        obj["spec"]["n"],
        (meta.get("labels") or {}).get("app", ""),
        obj["spec"]["nodeName"],
    )


def expected(w: Watch, log: list[Change]) -> list[tuple[Any, ...]]:
    after = w.after
    out: list[tuple[Any, ...]] = []
    if w.initial:
        state: dict[str, tuple[Obj, int]] = {}
        for ch in log:
            if ch.revision > after:
                break
            if ch.new is None:
                state.pop(ch.key, None)
            else:
                state[ch.key] = (ch.new, ch.revision)
        for k in sorted(state):
            obj, rev = state[k]
            if w.matches(obj):
                out.append(("ADDED", *view(obj, rev)))
    for ch in log:
        if ch.revision <= after:
            continue
        now = ch.new is not None and w.matches(ch.new)
        before = ch.prev is not None and w.matches(ch.prev)
        if now and before:
            assert ch.new is not None
            out.append(("MODIFIED", *view(ch.new, ch.revision)))
        elif now:
            assert ch.new is not None
            out.append(("ADDED", *view(ch.new, ch.revision)))
        elif before:
            assert ch.prev is not None
            out.append(("DELETED", *view(ch.prev, ch.revision)))
    return out


def seen(events: list[WatchEvent]) -> list[tuple[Any, ...]]:
    return [(e.type, *view(e.object, int(e.object["metadata"]["resourceVersion"]))) for e in events]


write = st.tuples(
    st.just("write"),
    st.sampled_from(NAMESPACES),
    st.sampled_from(NAMES),
    st.sampled_from(APPS),
    st.sampled_from(NODES),
    st.booleans(),  # delete (if it exists)
)
watch = st.tuples(
    st.just("watch"),
    st.sampled_from((None, None, *NAMESPACES)),  # each filter is unset half the time or more
    st.sampled_from((None, None, None, *APPS)),
    st.sampled_from((None, None, None, *NODES)),
    st.sampled_from((None, None, None, *NAMES)),
    st.one_of(st.just("0"), st.integers(min_value=0, max_value=8)),  # "0", or k revisions back
)
other = st.sampled_from(
    [("drain",), ("drain",), ("drain",), ("settle",), ("end",), ("fail",), ("compact",), ("close",)]
)
ops = st.lists(st.one_of(write, write, write, watch, other), min_size=10, max_size=60)


async def scenario(program: list[tuple[Any, ...]], capacity: int, buffer: int) -> None:
    store = MemStorage()
    cacher = Cacher(store, PODS, capacity=capacity, watcher_buffer=buffer, retry_delay=0.0005, fresh_timeout=2)
    await cacher.start()
    log: list[Change] = []
    current: dict[str, Obj] = {}
    watches: list[Watch] = []
    counter = 0

    async def settle() -> None:
        target = log[-1].revision if log else 0
        for _ in range(2000):
            if cacher.ready and cacher.revision >= target:
                return
            await asyncio.sleep(0)
        raise AssertionError(f"cache stuck at {cacher.revision}, wanted {target}")

    def drain_all() -> None:
        for one in watches:
            while (e := one.watcher.poll()) is not None:
                one.got.append(e)

    try:
        # One watcher of everything from the start, besides the generated ones.
        program = [("watch", None, None, None, None, "0"), *program]
        for op in program:
            kind = op[0]
            if kind == "write":
                _, ns, name, app, node, delete = op
                k = key(name, ns)
                prev = current.get(k)
                if delete and prev is not None:
                    deleted = await store.delete(k)
                    log.append(Change(deleted.revision, k, prev, None))
                    del current[k]
                elif not delete:
                    counter += 1
                    obj = pod(name, ns, app=app, node=node, n=counter)
                    if prev is None:
                        rev = await store.create(k, enc(obj))
                    else:
                        stored = await store.get(k)
                        assert stored is not None
                        rev = await store.update(k, enc(obj), stored.revision)
                    log.append(Change(rev, k, prev, obj))
                    current[k] = obj
            elif kind == "watch":
                _, ns, app, node, name, start = op
                await settle()
                fields = {}
                if node is not None:
                    fields["spec.nodeName"] = node
                if name is not None:
                    fields["metadata.name"] = name
                rv = "0" if start == "0" else str(max(1, cacher.revision - start))
                try:
                    watcher = await cacher.watch(
                        namespace=ns,
                        labels=Labels(app=app) if app is not None else None,
                        fields=Fields(fields) if fields else None,
                        resource_version=rv,
                    )
                except StatusError as err:
                    assert err.code == 410 and int(rv) < cacher._history.floor
                    continue
                initial = start == "0"
                after = watcher.after if initial else int(rv)
                watches.append(Watch(watcher, ns, app, node, name, initial, after))
            elif kind == "drain":
                await asyncio.sleep(0)
                drain_all()
            elif kind == "settle":
                await settle()
            elif kind == "end":
                store.end_watches()
            elif kind == "fail":
                store.fail_watches()
            elif kind == "compact":
                # The watch ends and the store compacts past where the cache would resume.
                store.end_watches()
                store.bump()
                store.bump()
                await store.compact(store.revision)
            elif kind == "close" and watches and not watches[0].watcher.closed:
                drain_all()
                watches[0].watcher.close()
                watches[0].got.append(WatchEvent("ERROR", {}))  # closed by the client: a prefix is fine
        await settle()
        drain_all()
        total = 0
        for w in watches:
            errored = bool(w.got) and w.got[-1].type == "ERROR"
            got = seen([e for e in w.got if e.type != "ERROR"])
            want = expected(w, log)
            event("watcher ended by an ERROR" if errored else "watcher complete")
            total += len(got)
            if errored:
                assert got == want[: len(got)], (got, want)
            else:
                assert got == want, (got, want)
                assert not w.watcher.closed
            assert all(e.type != "ERROR" for e in w.got[:-1])
        event(f"relists: {min(cacher.relists, 3)}")
        event(f"events seen: {'0' if not total else '1-9' if total < 10 else '10+'}")
    finally:
        await cacher.stop()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=ops, capacity=st.sampled_from([3, 8, 1000]), buffer=st.sampled_from([2, 5, 1000, 1000]))
def test_watchers_see_the_models_events(program: list[tuple[Any, ...]], capacity: int, buffer: int) -> None:
    asyncio.run(asyncio.wait_for(scenario(program, capacity, buffer), 20))
