"""The informer against a scripted list/watch source (hypothesis): streams that drop, end,
repeat events, deliver stale copies, meet compaction (410) and failing LISTs.  Whatever the
script, once the faults stop the informer's store equals the source's state, and the handlers
have been told every change the store went through (their view equals the store)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from components.client.informer import EventHandler, SharedInformer
from components.client.listwatch import ListResult
from components.client.reflector import INITIAL_EVENTS_END
from components.client.rest import GoneError, TransportError, WatchEvent
from machinery.objects import Obj
from tests.components.fakeclock import FakeClock

NAMES = ["a", "b"]  # few names: the same object meets every kind of fault


def seed_pick(n: int, salt: int) -> int:
    """Which of `n` older events a stale delivery repeats (varied, but fixed by the script)."""
    return (salt * 7919) % n


def meta_obj(name: str, rv: int, value: str = "") -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}, "data": {"v": value}}


class ScriptedSource:
    """A server in memory: a revision counter, the objects, the event history (compactable),
    and faults that the open watch stream acts on."""

    def __init__(self) -> None:
        self.rev = 0
        self.objects: dict[str, Obj] = {}
        self.history: list[tuple[int, str, Obj]] = []
        self.versions: dict[str, list[tuple[str, Obj]]] = {}  # every event of each name, for stale copies
        self.compacted = 0
        self.faults: list[str] = []
        self.fail_lists = 0
        self.wake = asyncio.Event()

    # -- the script -----------------------------------------------------------------------

    def put(self, name: str, value: str) -> None:
        self.rev += 1
        obj = meta_obj(name, self.rev, value)
        kind = "MODIFIED" if name in self.objects else "ADDED"
        self.objects[name] = obj
        self.history.append((self.rev, kind, obj))
        self.versions.setdefault(name, []).append((kind, obj))
        self.wake.set()

    def delete(self, name: str) -> None:
        if name not in self.objects:
            return
        self.rev += 1
        gone = meta_obj(name, self.rev, self.objects.pop(name)["data"]["v"])
        self.history.append((self.rev, "DELETED", gone))
        self.versions[name].append(("DELETED", gone))
        self.wake.set()

    def compact(self) -> None:
        self.compacted = self.rev
        self.history = []

    def fault(self, what: str) -> None:
        self.faults.append(what)
        self.wake.set()

    # -- ListWatch --------------------------------------------------------------------------

    async def list(self, resource_version: str) -> ListResult:
        await asyncio.sleep(0)
        if self.fail_lists:
            self.fail_lists -= 1
            raise TransportError("list: connection refused (scripted)")
        return ListResult(list(self.objects.values()), str(self.rev))

    def watch(
        self, resource_version: str, *, timeout_s: int, send_initial_events: bool = False
    ) -> AsyncIterator[WatchEvent]:
        return self._stream(resource_version, send_initial_events)

    async def _stream(self, resource_version: str, initial: bool) -> AsyncIterator[WatchEvent]:
        await asyncio.sleep(0)
        if initial:
            pos = self.rev
            for obj in list(self.objects.values()):
                yield WatchEvent("ADDED", obj)
            end = {"metadata": {"resourceVersion": str(pos), "annotations": {INITIAL_EVENTS_END: "true"}}}
            yield WatchEvent("BOOKMARK", end)
        else:
            pos = int(resource_version or 0)
            if pos < self.compacted:
                raise GoneError(410, "Expired", "too old resource version (scripted)")
        last: WatchEvent | None = None
        while True:
            while self.faults:
                fault = self.faults.pop(0)
                if fault == "drop":
                    raise TransportError("watch: connection reset (scripted)")
                if fault == "end":
                    return
                if fault == "dup" and last is not None:
                    yield last
                if fault.startswith("stale:"):  # a copy older than the stream's position (a lagging cache)
                    older = [
                        e for e in self.versions.get(fault[6:], []) if int(e[1]["metadata"]["resourceVersion"]) <= pos
                    ]
                    if older:
                        kind, obj = older[seed_pick(len(older), pos)]
                        yield WatchEvent(kind, obj)
                if fault == "bookmark":
                    yield WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": str(pos)}})
            if pos < self.compacted:  # the events it had not delivered yet are gone
                raise GoneError(410, "Expired", "compacted while the watch lagged (scripted)")
            pending = [(r, t, o) for r, t, o in self.history if r > pos]
            if pending:
                r, t, o = pending[0]
                pos = r
                last = WatchEvent(t, o)
                yield last
                continue
            self.wake.clear()
            await self.wake.wait()


ops = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMES), st.text("xyz", max_size=2)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("compact"), st.just(""), st.just("")),
    st.tuples(st.sampled_from(["drop", "end", "dup", "bookmark"]), st.just(""), st.just("")),
    st.tuples(st.just("stale"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("fail_lists"), st.just(""), st.just("")),
    st.tuples(st.just("run"), st.just(""), st.just("")),
)


def state_of(objs: list[Obj]) -> dict[str, str]:
    return {o["metadata"]["name"]: o["data"]["v"] for o in objs}


def step(op: str, name: str = "", value: str = "") -> tuple[str, str, str]:
    return (op, name, value)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a loaded CI box
# a stale DELETED of an earlier incarnation must not delete the current one
@example(
    [
        step("put", "a"),
        step("delete", "a"),
        step("put", "a"),
        step("put", "b"),
        step("put", "b"),
        step("stale", "a"),
        step("run"),
    ],
    False,
    0,
)
# after a re-list, a stale copy of what the re-list found deleted must not bring it back
@example(
    [
        step("run"),
        step("drop"),
        step("put", "a"),
        step("delete", "a"),
        step("compact"),
        step("run"),
        step("stale", "a"),
        step("run"),
    ],
    False,
    0,
)
@given(st.lists(ops, max_size=40), st.booleans(), st.integers(0, 2**32))
def test_the_store_converges_to_the_source(script: list[tuple[str, str, str]], watch_list: bool, seed: int) -> None:
    async def go() -> None:
        source = ScriptedSource()
        clock = FakeClock()
        informer = SharedInformer("cm", source, clock=clock, rng=random.Random(seed), use_watch_list=watch_list)
        view: dict[str, str] = {}

        def on_add(o: Obj) -> None:
            assert o["metadata"]["name"] not in view, "an add for an object the handler already has"
            view[o["metadata"]["name"]] = o["data"]["v"]

        def on_update(old: Obj, new: Obj) -> None:
            assert old["metadata"]["name"] in view, "an update for an object the handler never saw"
            view[new["metadata"]["name"]] = new["data"]["v"]

        def on_delete(o: Obj) -> None:
            assert view.pop(o["metadata"]["name"], None) is not None, "a delete for an unknown object"

        informer.add_handler(EventHandler(on_add, on_update, on_delete))
        informer.start()

        async def settle() -> None:
            for _ in range(20):
                await asyncio.sleep(0)
            await clock.advance(61.0)  # past any back-off

        try:
            for op, name, value in script:
                if op == "put":
                    source.put(name, value)
                elif op == "delete":
                    source.delete(name)
                elif op == "compact":
                    source.compact()
                elif op == "stale":
                    source.fault(f"stale:{name}")
                elif op == "fail_lists":
                    source.fail_lists += 2
                elif op == "run":
                    await settle()
                else:
                    source.fault(op)
                for _ in range(10):  # the open stream acts on the step before the next one
                    await asyncio.sleep(0)
            source.faults.clear()
            source.fail_lists = 0
            for _ in range(50):
                await settle()
                if informer.has_synced() and state_of(informer.indexer.objects()) == state_of(
                    list(source.objects.values())
                ):
                    break
            assert state_of(informer.indexer.objects()) == state_of(list(source.objects.values()))
            assert view == state_of(informer.indexer.objects())
        finally:
            await informer.stop()

    asyncio.run(go())
