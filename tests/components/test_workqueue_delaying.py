"""DelayingQueue on a fake clock: keys appear at their due time, the earliest due time wins, one
entry (and at most one timer) however often a key is re-added; then a hypothesis sweep."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from components.client.workqueue import DelayingQueue, WorkQueue
from tests.components.fakeclock import FakeClock

TIMEOUT = 5.0  # real seconds: a hang fails the test instead of stalling the suite


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(TIMEOUT):
            await test()

    asyncio.run(bounded())


async def settle(ticks: int = 10) -> None:
    for _ in range(ticks):
        await asyncio.sleep(0)


async def drain(q: DelayingQueue[str]) -> list[str]:
    """Take and finish every key available now."""
    got = []
    while q.len():
        key = await q.get()
        q.done(key)
        got.append(key)
    return got


def test_a_delayed_key_appears_at_its_due_time_not_before() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: DelayingQueue[str] = DelayingQueue(clock=clock)
        q.add_after("a", 1.0)
        await settle()
        assert q.len() == 0 and q.waiting == 1
        await clock.advance(0.5)
        assert q.len() == 0
        await clock.advance(0.5)
        assert await drain(q) == ["a"]
        assert q.waiting == 0

    run(go)


def test_non_positive_delay_adds_now() -> None:
    async def go() -> None:
        q: DelayingQueue[str] = DelayingQueue(clock=FakeClock())
        q.add_after("a", 0)
        q.add_after("b", -3)
        assert await drain(q) == ["a", "b"]
        assert q.waiting == 0

    run(go)


def test_the_earlier_due_time_wins_and_a_later_one_is_ignored() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: DelayingQueue[str] = DelayingQueue(clock=clock)
        q.add_after("a", 5.0)
        q.add_after("a", 2.0)  # earlier: wins
        q.add_after("a", 9.0)  # later: ignored
        await settle()
        assert q.waiting == 1 and q.due_of("a") == 2.0
        await clock.advance(2.0)
        assert await drain(q) == ["a"]
        await clock.advance(10.0)
        assert await drain(q) == []  # the 5 s and 9 s adds were folded into the 2 s one

    run(go)


def test_keys_come_out_in_due_order_with_ties_in_add_order() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: DelayingQueue[str] = DelayingQueue(clock=clock)
        for key, delay in [("c", 3.0), ("a", 1.0), ("b2", 2.0), ("b1", 2.0), ("d", 4.0)]:
            q.add_after(key, delay)
        await settle()
        await clock.advance(10.0)
        assert await drain(q) == ["a", "b2", "b1", "c", "d"]

    run(go)


def test_an_earlier_key_wakes_the_timer_early_and_one_timer_serves_all() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: DelayingQueue[str] = DelayingQueue(clock=clock)
        q.add_after("late", 100.0)
        await settle()
        q.add_after("soon", 1.0)
        await settle()
        assert clock.sleepers() == 1  # the restarted timer replaced the old sleep
        await clock.advance(1.0)
        assert await drain(q) == ["soon"]
        await clock.advance(99.0)
        assert await drain(q) == ["late"]
        await settle()
        assert clock.sleepers() == 0  # nothing waiting: no timer left behind

    run(go)


def test_memory_is_one_entry_per_waiting_key_however_often_it_is_added() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: DelayingQueue[str] = DelayingQueue(clock=clock)
        for i in range(1000):
            q.add_after(f"k{i % 10}", 50.0 - i * 0.01)
            if i % 100 == 0:
                await settle(2)
        await settle()
        assert q.waiting == 10 and len(q._heap._entries) == 10
        assert clock.sleepers() == 1
        await clock.advance(50.0)
        assert sorted(await drain(q)) == [f"k{i}" for i in range(10)]

    run(go)


def test_shut_down_drops_waiting_keys_and_stops_the_timer() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: DelayingQueue[str] = DelayingQueue(WorkQueue(), clock=clock)
        q.add_after("a", 1.0)
        await settle()
        q.shut_down()
        await settle()
        assert clock.sleepers() == 0 and q.waiting == 0
        q.add_after("b", 1.0)
        await clock.advance(5.0)
        assert q.len() == 0 and q.waiting == 0

    run(go)


# Delays and advances are multiples of 1/4 s: exact in binary, so due times compare exactly.
QUARTERS = st.integers(-2, 16).map(lambda n: n / 4)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add_after"), st.sampled_from(["a", "b", "c", "d", "e"]), QUARTERS),
        st.tuples(st.just("advance"), st.just(""), st.integers(0, 12).map(lambda n: n / 4)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_every_key_comes_out_at_its_earliest_due_time_exactly_once(ops: list[tuple[str, str, float]]) -> None:
    """After each step every available key is taken and finished; what came out must be exactly
    the keys due by now (earliest due time per waiting key) plus immediate adds, once each."""

    async def go() -> None:
        clock = FakeClock()
        q: DelayingQueue[str] = DelayingQueue(clock=clock)
        waiting: dict[str, float] = {}  # model: key -> earliest due time
        ready: set[str] = set()  # model: keys in the work queue (a set: it de-duplicates)
        for op, key, amount in ops:
            if op == "add_after":
                q.add_after(key, amount)
                if amount <= 0:
                    ready.add(key)
                else:
                    waiting[key] = min(waiting.get(key, float("inf")), clock.now() + amount)
            else:
                await clock.advance(amount)
            await settle()
            for k, due in list(waiting.items()):
                if due <= clock.now():
                    ready.add(k)
                    del waiting[k]
            got = await drain(q)
            assert len(got) == len(set(got)), f"a key came out twice: {got}"
            assert set(got) == ready, f"at t={clock.now()}: got {got}, expected {sorted(ready)}"
            ready.clear()
            assert q.waiting == len(waiting)
            assert all(q.due_of(k) == due for k, due in waiting.items())
            assert clock.sleepers() == (1 if waiting else 0)

    run(go)
