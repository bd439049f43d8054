"""How many requests the apiserver works on at once: past the limit a client gets 429 with
Retry-After (as kube-apiserver's max-requests-inflight), so a flood of requests or watches
costs the server a bounded amount of memory instead of everything it has."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from apiserver import errors

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class InFlight:
    def __init__(self, reads: int = 400, writes: int = 200, watches: int = 20_000) -> None:
        self.limits = {"read": reads, "write": writes, "watch": watches}
        self.current = {"read": 0, "write": 0, "watch": 0}

    @contextlib.contextmanager
    def admit(self, kind: str) -> Iterator[None]:
        self.acquire(kind)
        try:
            yield
        finally:
            self.release(kind)

    def acquire(self, kind: str) -> None:
        if self.current[kind] >= self.limits[kind]:
            raise errors.too_many_requests(
                f"too many {kind} requests in flight (limit {self.limits[kind]}), please try again later"
            )
        self.current[kind] += 1

    def release(self, kind: str) -> None:
        self.current[kind] -= 1


def kind_of(method: str) -> str:
    return "write" if method in MUTATING else "read"
