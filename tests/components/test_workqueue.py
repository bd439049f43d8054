"""WorkQueue's promises, one test each: fair, stingy, never two workers on one key, shut-down,
and many producers and consumers at once."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from components.client.workqueue import ShutDown, WorkQueue

TIMEOUT = 5.0  # real seconds: a hang fails the test instead of stalling the suite


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(TIMEOUT):
            await test()

    asyncio.run(bounded())


async def settle(ticks: int = 10) -> None:
    for _ in range(ticks):
        await asyncio.sleep(0)


def test_fair_keys_come_out_in_the_order_added() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        for key in ["ns/c", "ns/a", "ns/b"]:
            q.add(key)
        assert [await q.get() for _ in range(3)] == ["ns/c", "ns/a", "ns/b"]

    run(go)


def test_stingy_a_key_added_many_times_while_waiting_is_processed_once() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        for key in ["a", "b", "a", "a", "b", "c", "a"]:
            q.add(key)
        assert q.len() == 3
        assert q.adds == 3  # merges are not counted as adds
        assert [await q.get() for _ in range(3)] == ["a", "b", "c"]  # first-add order kept
        assert q.len() == 0

    run(go)


def test_a_key_readded_while_processing_is_handed_out_again_only_after_done() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        assert await q.get() == "a"
        q.add("a")
        q.add("a")
        assert q.len() == 0  # held: not waiting, so no second worker can take it
        second = asyncio.create_task(q.get())
        await settle()
        assert not second.done()
        q.done("a")
        await settle()
        assert second.done() and second.result() == "a"
        q.done("a")
        assert q.len() == 0  # the two re-adds made one more round, not two

    run(go)


def test_done_without_a_readd_does_not_requeue_and_unknown_done_is_a_no_op() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        key = await q.get()
        q.done(key)
        q.done("never-added")
        assert q.len() == 0
        q.add("a")  # free again: queued at once
        assert q.len() == 1

    run(go)


def test_a_waiting_getter_wakes_on_add_and_getters_are_served_in_arrival_order() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        first = asyncio.create_task(q.get())
        second = asyncio.create_task(q.get())
        await settle()
        assert not first.done() and not second.done()
        q.add("x")
        await settle()
        assert first.done() and first.result() == "x"
        assert not second.done()
        q.add("y")
        await settle()
        assert second.result() == "y"

    run(go)


def test_a_cancelled_getter_does_not_swallow_the_key_it_was_woken_for() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        woken = asyncio.create_task(q.get())
        other = asyncio.create_task(q.get())
        await settle()
        q.add("x")  # wakes `woken`...
        woken.cancel()  # ...which is cancelled before it runs
        await settle()
        assert woken.cancelled()
        assert other.done() and other.result() == "x"

    run(go)


def test_cancelled_getters_leave_no_waiters_behind() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        for _ in range(50):
            task = asyncio.create_task(q.get())
            await settle(2)
            task.cancel()
            await settle(2)
        assert len(q._waiters) == 0

    run(go)


def test_shut_down_drains_waiting_keys_then_raises_and_refuses_new_ones() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        q.add("b")
        assert await q.get() == "a"
        q.add("a")  # re-added while held: still owed a round after done
        q.shut_down()
        assert q.shutting_down
        q.add("c")
        assert q.len() == 1 and q.adds == 3
        assert await q.get() == "b"
        q.done("a")
        assert await q.get() == "a"
        with pytest.raises(ShutDown):
            await q.get()

    run(go)


def test_shut_down_wakes_every_waiting_getter() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        getters = [asyncio.create_task(q.get()) for _ in range(4)]
        await settle()
        q.shut_down()
        results = await asyncio.gather(*getters, return_exceptions=True)
        assert all(isinstance(r, ShutDown) for r in results)

    run(go)


def test_shut_down_without_drain_drops_waiting_keys() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        q.add("b")
        assert await q.get() == "a"
        q.add("a")
        q.shut_down(drain=False)
        assert q.len() == 0
        with pytest.raises(ShutDown):
            await q.get()
        q.done("a")  # the held key is released, and its re-add was dropped too
        assert q.len() == 0

    run(go)


@pytest.mark.parametrize("seed", range(5))
def test_many_producers_and_consumers_process_every_key_never_concurrently(seed: int) -> None:
    rng = random.Random(seed)
    producers, consumers, keys, adds_each = 6, 4, [f"ns/k{i}" for i in range(12)], 40
    schedule = [[rng.choice(keys) for _ in range(adds_each)] for _ in range(producers)]

    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        held: set[str] = set()
        last_add: dict[str, int] = {}  # key -> tick of its last add
        last_start: dict[str, int] = {}  # key -> tick a worker last took it
        tick = 0
        violations: list[str] = []

        async def produce(keys_to_add: list[str]) -> None:
            nonlocal tick
            for key in keys_to_add:
                tick += 1
                last_add[key] = tick
                q.add(key)
                await settle(rng.randint(0, 2))

        async def consume() -> None:
            nonlocal tick
            while True:
                try:
                    key = await q.get()
                except ShutDown:
                    return
                if key in held:
                    violations.append(key)
                held.add(key)
                tick += 1
                last_start[key] = tick
                await settle(rng.randint(0, 3))
                held.discard(key)
                q.done(key)

        workers = [asyncio.create_task(consume()) for _ in range(consumers)]
        await asyncio.gather(*(produce(s) for s in schedule))
        for _ in range(1000):  # bounded wait for the queue to go idle
            if q.len() == 0 and not held:
                break
            await asyncio.sleep(0)
        q.shut_down()
        await asyncio.gather(*workers)
        assert violations == []
        assert set(last_start) == set(last_add)
        # every key's last add was followed by a worker taking it: no add was lost
        assert all(last_start[k] > last_add[k] for k in last_add)

    run(go)
