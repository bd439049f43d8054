"""The scheduling queue, pure (time comes in as `now`): active, backoff and unschedulable pods.

* active: popped by priority (higher first), then by when the pod was first queued.
* backoff: a pod that failed waits 1 s * 2**(attempts-1), at most 10 s, before it is active again.
* unschedulable: a pod no node could take waits for a cluster event that may help
  (`move_all`), or at most `UNSCHEDULABLE_MAX_S`; then it goes to backoff (if still backing
  off) or active.  A move that happened while the pod was being scheduled sends it to
  backoff instead, so an event is never lost to a cycle that started before it.
Each pod is in at most one queue, keyed by namespace/name.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from components.scheduler.nodeinfo import pod_key, priority_of
from machinery.objects import Obj

INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 10.0
UNSCHEDULABLE_MAX_S = 300.0


@dataclass(slots=True)
class QueuedPod:
    pod: Obj
    key: str
    timestamp: float  # when first queued (orders pods of one priority; e2e latency starts here)
    attempts: int = 0
    unschedulable_since: float = 0.0
    unschedulable_plugins: set[str] = field(default_factory=set)
    cycle: int = 0  # the scheduling cycle that popped it last

    def backoff_expiry(self, last_failure: float) -> float:
        d = INITIAL_BACKOFF_S * float(2 ** max(0, self.attempts - 1))
        return last_failure + min(d, MAX_BACKOFF_S)


def _spec_changed(old: Obj, new: Obj) -> bool:
    """Whether an update may change the scheduling outcome (status-only changes do not)."""

    def strip(o: Obj) -> Obj:
        volatile = ("resourceVersion", "managedFields", "generation")
        meta = {k: v for k, v in (o.get("metadata") or {}).items() if k not in volatile}
        return {"metadata": meta, "spec": o.get("spec")}

    return strip(old) != strip(new)


class SchedulingQueue:
    def __init__(self) -> None:
        self._active: list[tuple[int, float, int, str]] = []  # (-priority, timestamp, seq, key)
        self._active_keys: dict[str, int] = {}  # key -> seq of its live heap entry
        self._backoff: dict[str, float] = {}  # key -> expiry
        self._unschedulable: set[str] = set()
        self._pods: dict[str, QueuedPod] = {}  # every queued pod, whichever queue
        self._in_flight: dict[str, QueuedPod] = {}
        self._seq = 0
        self.cycle = 0
        self._move_request_cycle = -1

    # -- informer events -----------------------------------------------------------------------

    def add(self, pod: Obj, now: float) -> None:
        key = pod_key(pod)
        if key in self._in_flight:
            self._in_flight[key].pod = pod
            return
        qp = self._pods.get(key)
        if qp is None:
            qp = QueuedPod(pod, key, now)
            self._pods[key] = qp
            self._push_active(qp)
        else:
            qp.pod = pod

    def update(self, old: Obj, new: Obj, now: float) -> None:
        key = pod_key(new)
        if key in self._in_flight:
            self._in_flight[key].pod = new
            return
        qp = self._pods.get(key)
        if qp is None:
            self.add(new, now)
            return
        qp.pod = new
        if key in self._unschedulable and _spec_changed(old, new):
            self._unschedulable.discard(key)
            self._to_active_or_backoff(qp, now)

    def delete(self, key: str) -> None:
        self._pods.pop(key, None)
        self._in_flight.pop(key, None)
        self._active_keys.pop(key, None)
        self._backoff.pop(key, None)
        self._unschedulable.discard(key)

    def move_all(self, now: float, only_plugins: set[str] | None = None) -> None:
        """A cluster event that may make unschedulable pods schedulable (all, or those rejected
        by one of `only_plugins`)."""
        self._move_request_cycle = self.cycle
        for key in list(self._unschedulable):
            qp = self._pods[key]
            if only_plugins is not None and not (qp.unschedulable_plugins & only_plugins):
                continue
            self._unschedulable.discard(key)
            self._to_active_or_backoff(qp, now)

    # -- the scheduling loop --------------------------------------------------------------------

    def pop(self, now: float) -> QueuedPod | None:
        self.flush(now)
        while self._active:
            _, _, seq, key = heapq.heappop(self._active)
            if self._active_keys.get(key) != seq:
                continue  # superseded or deleted
            del self._active_keys[key]
            qp = self._pods.pop(key)
            self.cycle += 1
            qp.cycle = self.cycle
            qp.attempts += 1
            self._in_flight[key] = qp
            return qp
        return None

    def done(self, key: str) -> None:
        """The pod was bound (or assumed): it leaves the queue for good."""
        self._in_flight.pop(key, None)

    def add_unschedulable(self, qp: QueuedPod, now: float, plugins: set[str]) -> None:
        """A pod whose attempt failed: unschedulable (plugins rejected it) or, with no plugins
        (an error, a failed binding), backoff."""
        if self._in_flight.pop(qp.key, None) is None:
            return  # deleted meanwhile
        self._pods[qp.key] = qp
        qp.unschedulable_plugins = set(plugins)
        if plugins and self._move_request_cycle < qp.cycle:
            qp.unschedulable_since = now
            self._unschedulable.add(qp.key)
        else:
            self._backoff[qp.key] = qp.backoff_expiry(now)

    def flush(self, now: float) -> None:
        for key, expiry in list(self._backoff.items()):
            if expiry <= now:
                del self._backoff[key]
                self._push_active(self._pods[key])
        for key in list(self._unschedulable):
            qp = self._pods[key]
            if now - qp.unschedulable_since >= UNSCHEDULABLE_MAX_S:
                self._unschedulable.discard(key)
                self._to_active_or_backoff(qp, now)

    def next_due(self) -> float | None:
        """When the earliest backed-off pod becomes active."""
        return min(self._backoff.values(), default=None)

    def pending(self) -> dict[str, int]:
        return {
            "active": len(self._active_keys),
            "backoff": len(self._backoff),
            "unschedulable": len(self._unschedulable),
        }

    def __contains__(self, key: str) -> bool:
        return key in self._pods or key in self._in_flight

    def get(self, key: str) -> QueuedPod | None:
        return self._pods.get(key) or self._in_flight.get(key)

    def pods(self, where: Callable[[Obj], bool] = lambda _: True) -> list[Obj]:
        return [qp.pod for qp in (*self._pods.values(), *self._in_flight.values()) if where(qp.pod)]

    # -- internals ------------------------------------------------------------------------------

    def _to_active_or_backoff(self, qp: QueuedPod, now: float) -> None:
        last = qp.unschedulable_since or qp.timestamp
        expiry = qp.backoff_expiry(last) if qp.attempts else now
        if expiry > now:
            self._backoff[qp.key] = expiry
        else:
            self._push_active(qp)

    def _push_active(self, qp: QueuedPod) -> None:
        self._seq += 1
        self._active_keys[qp.key] = self._seq
        heapq.heappush(self._active, (-priority_of(qp.pod), qp.timestamp, self._seq, qp.key))
