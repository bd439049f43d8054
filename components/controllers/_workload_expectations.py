"""What a controller expects its informers to show before it acts again (kube's
UIDTrackingControllerExpectations).

A reconcile that creates n pods expects n adds; one that deletes pods expects those pods' keys
to go.  Until the informer has shown them all (or the record is older than the timeout, in
case an event was lost), the controller must not create or delete again: its informer cache
is behind its own writes, and a burst of events would otherwise act on the same gap twice."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

EXPECTATIONS_TIMEOUT_S = 5 * 60.0


@dataclass
class _Record:
    adds: int
    deletes: set[str] = field(default_factory=set)
    at: float = 0.0


class Expectations:
    """Per controller key: creations still to be observed and the pod keys still to go."""

    def __init__(self, now: Callable[[], float], timeout: float = EXPECTATIONS_TIMEOUT_S) -> None:
        self._now = now
        self._timeout = timeout
        self._records: dict[str, _Record] = {}

    def satisfied(self, key: str) -> bool:
        """Whether the controller may act on `key`: nothing in flight, or the record timed out."""
        rec = self._records.get(key)
        if rec is None:
            return True
        if rec.adds <= 0 and not rec.deletes:
            return True
        return self._now() - rec.at > self._timeout

    def expect_creations(self, key: str, count: int) -> None:
        self._records[key] = _Record(adds=count, at=self._now())

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        self._records[key] = _Record(adds=0, deletes=set(pod_keys), at=self._now())

    def expect(self, key: str, creations: int, pod_keys: Iterable[str]) -> None:
        """Both at once (a DaemonSet creates on some nodes while it deletes on others)."""
        self._records[key] = _Record(adds=creations, deletes=set(pod_keys), at=self._now())

    def creation_observed(self, key: str) -> None:
        rec = self._records.get(key)
        if rec is not None:
            rec.adds -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        rec = self._records.get(key)
        if rec is not None:
            rec.deletes.discard(pod_key)

    def forget(self, key: str) -> None:
        self._records.pop(key, None)

    def pending(self, key: str) -> tuple[int, int]:
        """(creations, deletions) not yet observed, for tests and logs."""
        rec = self._records.get(key)
        return (0, 0) if rec is None else (max(rec.adds, 0), len(rec.deletes))
