"""Rate limiters and the rate-limiting queue: failed keys come back later, and not all at once.

A limiter answers "how long should this key wait before its next try?" and remembers failures
per key until `forget`.  Limiters never sleep: the only time they read is the injected Clock's
`now()`, so tests check exact delays without waiting.  The queue turns the answer into an
`add_after` on a `DelayingQueue`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from components.client.workqueue.delaying import DelayingQueue
from components.client.workqueue.delegating import DelegatingQueue
from components.client.workqueue.queue import K, WorkQueue
from machinery.clock import Clock, SystemClock

K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[K_contra]):
    def when(self, key: K_contra) -> float:
        """Seconds `key` should wait before its next try; records one more failure."""
        ...

    def forget(self, key: K_contra) -> None:
        """The key succeeded (or was given up on): drop its failure history."""
        ...

    def num_requeues(self, key: K_contra) -> int:
        """Failures recorded for `key` since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """Per-key back-off: base * 2**failures, capped; one bad key does not slow the others."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self.base = base
        self.cap = cap
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        try:
            backoff = math.ldexp(self.base, failures)
        except OverflowError:  # thousands of failures: past any cap
            return self.cap
        return min(backoff, self.cap)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter(Generic[K]):
    """An overall token bucket: `burst` tries at once, then `qps` per second, whatever the key.

    Each try reserves a token even when none is left (the balance goes negative) and waits until
    the bucket would have refilled to it, so a storm is spread out at `qps` rather than refused.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"a bucket needs qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.qps = qps
        self.burst = burst
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._tokens = float(burst)
        self._last = self.clock.now()

    def when(self, key: K) -> float:
        now = self.clock.now()
        if now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: K) -> None:
        """The bucket is not per key: nothing to forget."""

    def num_requeues(self, key: K) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """The longest wait any of its limiters asks for (every limiter records every try)."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, key: K) -> float:
        return max([limiter.when(key) for limiter in self.limiters])

    def forget(self, key: K) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter[K]:
    """client-go's default for controllers: per-key 5 ms..1000 s back-off under 10 qps, burst 100."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )


class RateLimitingQueue(DelegatingQueue[K]):
    """A `DelayingQueue` plus `add_rate_limited`; everything else is delegated."""

    def __init__(
        self,
        limiter: RateLimiter[K] | None = None,
        *,
        clock: Clock | None = None,
        queue: DelayingQueue[K] | None = None,
    ) -> None:
        """`clock` drives the default limiter and the delaying queue built when `queue` is None."""
        self.queue: DelayingQueue[K] = queue if queue is not None else DelayingQueue(WorkQueue(), clock=clock)
        self.limiter: RateLimiter[K] = limiter if limiter is not None else default_controller_rate_limiter(clock)

    def add_rate_limited(self, key: K) -> None:
        """Add `key` again once the limiter allows it (a retry after a failure)."""
        if self.queue.shutting_down:
            return
        self.queue.queue.retries += 1
        self.queue.add_after(key, self.limiter.when(key))

    def forget(self, key: K) -> None:
        """Processing `key` succeeded: its next failure starts the back-off from the beginning."""
        self.limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.limiter.num_requeues(key)

    def add_after(self, key: K, seconds: float) -> None:
        self.queue.add_after(key, seconds)
