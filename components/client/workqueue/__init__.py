"""Work queues for control loops, with client-go's util/workqueue promises.

* Fair: keys are handed out in the order they were first added.
* Stingy: a key added many times before a worker takes it is processed once.
* Exclusive: a key is never held by two workers; one re-added while held is handed out again
  only after `done(key)`.
* Shut-down: `shut_down()` refuses new keys; `get` hands out what is left, then raises
  `ShutDown` (`shut_down(drain=False)` drops what is left, so `get` raises at once).
* `DelayingQueue.add_after(key, s)`: the key reaches the queue `s` seconds later on the injected
  Clock; a key already waiting keeps its earlier due time (one entry per key).
* `RateLimitingQueue.add_rate_limited(key)`: retried after the limiter's delay
  (default: per-key 5 ms * 2**failures up to 1000 s, under an overall 10 qps / 100 burst
  bucket); `forget(key)` resets the key's back-off after a success.

asyncio on one event loop, no threads.  Plain-attribute metrics for an exporter: `depth`,
`adds`, `retries`.
"""

from components.client.workqueue.delaying import DelayingQueue
from components.client.workqueue.queue import ShutDown, WorkQueue
from components.client.workqueue.rate_limiting import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    RateLimitingQueue,
    default_controller_rate_limiter,
)

__all__ = [
    "BucketRateLimiter",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "RateLimitingQueue",
    "ShutDown",
    "WorkQueue",
    "default_controller_rate_limiter",
]
