"""Rate limiters with exact delays on a fake clock (no sleeping), and the rate-limiting queue."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from components.client.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    RateLimitingQueue,
    default_controller_rate_limiter,
)
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


def test_exponential_doubles_per_failure_from_5ms() -> None:
    rl: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    assert [rl.when("a") for _ in range(5)] == [0.005, 0.010, 0.020, 0.040, 0.080]
    assert rl.num_requeues("a") == 5
    assert rl.when("b") == 0.005  # per key: a's failures do not slow b


def test_exponential_is_capped_even_after_absurdly_many_failures() -> None:
    rl: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [rl.when("a") for _ in range(2000)]
    assert delays[17] == 0.005 * 2**17 == 655.36
    assert delays[18] == 1000.0  # 1310.72 capped
    assert delays[-1] == 1000.0 and max(delays) == 1000.0


def test_exponential_forget_resets_the_back_off() -> None:
    rl: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1.0, 60.0)
    assert [rl.when("a") for _ in range(3)] == [1.0, 2.0, 4.0]
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == 1.0


def test_bucket_allows_burst_then_spaces_at_qps_and_refills_with_time() -> None:
    clock = FakeClock()
    rl: BucketRateLimiter[str] = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [rl.when(f"k{i}") for i in range(100)] == [0.0] * 100
    assert [round(rl.when("x"), 9) for _ in range(3)] == [0.1, 0.2, 0.3]
    clock.t += 1.0  # 10 tokens back: the 3 borrowed are repaid, 7 left
    assert [rl.when("y") for _ in range(7)] == [0.0] * 7
    assert round(rl.when("y"), 9) == 0.1
    clock.t += 1000.0  # refill never exceeds the burst
    assert [rl.when("z") for _ in range(100)] == [0.0] * 100
    assert rl.when("z") > 0
    assert rl.num_requeues("z") == 0  # not a per-key limiter
    rl.forget("z")


def test_bucket_rejects_a_bucket_that_can_never_fill() -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0, burst=1, clock=FakeClock())
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=1, burst=0, clock=FakeClock())


def test_max_of_takes_the_longest_wait_and_forget_reaches_every_limiter() -> None:
    clock = FakeClock()
    slow: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1.0, 100.0)
    fast: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.5, 100.0)
    bucket: BucketRateLimiter[str] = BucketRateLimiter(qps=1, burst=2, clock=clock)
    rl: MaxOfRateLimiter[str] = MaxOfRateLimiter(fast, slow, bucket)
    assert [rl.when("a") for _ in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert rl.num_requeues("a") == 4 == fast.num_requeues("a")  # every limiter saw every try
    rl.forget("a")
    assert rl.num_requeues("a") == 0 == fast.num_requeues("a")
    assert rl.when("a") == 3.0  # the bucket now dominates: 4 tries against a burst of 2 at 1 qps
    with pytest.raises(ValueError):
        MaxOfRateLimiter[str]()


def test_default_controller_rate_limiter_is_5ms_exponential_under_a_10qps_100_burst_bucket() -> None:
    clock = FakeClock()
    rl: MaxOfRateLimiter[str] = default_controller_rate_limiter(clock)
    assert [rl.when("a") for _ in range(3)] == [0.005, 0.010, 0.020]
    for i in range(97):
        assert rl.when(f"k{i}") == 0.005  # burst not yet spent: the per-key back-off rules
    assert round(rl.when("b"), 9) == 0.1  # the 101st try in no time: the bucket rules
    for _ in range(30):
        rl.when("a")
    assert rl.when("a") == 1000.0  # the per-key cap


class Scripted:
    """A limiter that answers from a script, to test the queue apart from any real limiter."""

    def __init__(self, delays: list[float]) -> None:
        self.delays = delays
        self.forgotten: list[str] = []
        self.tries = 0

    def when(self, key: str) -> float:
        self.tries += 1
        return self.delays.pop(0)

    def forget(self, key: str) -> None:
        self.forgotten.append(key)

    def num_requeues(self, key: str) -> int:
        return self.tries


def test_a_scripted_limiter_satisfies_the_protocol() -> None:
    limiter: RateLimiter[str] = Scripted([1.0])
    assert limiter.when("a") == 1.0


def test_rate_limiting_queue_requeues_after_the_limiters_delay() -> None:
    async def go() -> None:
        clock = FakeClock()
        limiter = Scripted([2.0, 0.0])
        q: RateLimitingQueue[str] = RateLimitingQueue(limiter, clock=clock)
        q.add("a")
        assert await q.get() == "a"
        q.add_rate_limited("a")  # failed: back in 2 s
        q.done("a")
        await settle()
        assert q.len() == 0 and q.retries == 1 and q.num_requeues("a") == 1
        await clock.advance(2.0)
        assert await q.get() == "a"
        q.add_rate_limited("a")  # a zero delay: back at once, but only after done
        assert q.len() == 0
        q.done("a")
        assert q.len() == 1
        q.forget("a")
        assert limiter.forgotten == ["a"]
        assert (q.retries, q.adds, q.depth) == (2, 3, 1)

    run(go)


def test_rate_limiting_queue_with_the_default_limiter_backs_off_exponentially() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
        delays = []
        for _ in range(4):
            q.add_rate_limited("a")
            await settle()
            due = q.queue.due_of("a")
            assert due is not None
            delays.append(round(due - clock.now(), 9))
            await clock.advance((due - clock.now()) / 2)
            assert q.len() == 0  # not before its due time
            await clock.advance(due - clock.now())
            assert q.len() == 1
            q.done(await q.get())
        assert delays == [0.005, 0.01, 0.02, 0.04]
        q.forget("a")
        assert q.num_requeues("a") == 0
        q.shut_down()
        q.add_rate_limited("a")
        assert q.retries == 4  # refused after shut-down: not counted

    run(go)
