"""core/v1 Events, written as client-go's event recorder writes them, for every component that
reports what it did (the scheduler, the kubelet, the controllers).

- One event per (involved object, field path, type, reason, message): a repeat bumps `count`
  and `lastTimestamp` of the event already written (client-go's EventCorrelator) instead of
  creating another, so a probe that fails every 10 s makes one line in `kubectl describe`.
- A spam filter per involved object (client-go's EventSourceObjectSpamFilter: a burst of 25,
  then one every 5 minutes): a crash-looping pod cannot flood the apiserver with events.
- Recording never blocks the caller: events go out from background tasks, at most
  `MAX_PENDING` at once (more are dropped and counted, as client-go's broadcaster drops on a
  full channel), and a failed write is logged, never raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from components.client.rest import ApiError, NotFoundError, RestClient, TransportError, path_of

log = logging.getLogger("raftkube.events")
MAX_PENDING = 1000
REMEMBERED = 4096  # events (for count bumps) and objects (for the spam filter) kept in memory
SPAM_BURST = 25
SPAM_REFILL_S = 300.0  # one more event per object every 5 minutes once the burst is spent
NORMAL, WARNING = "Normal", "Warning"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an event is about (`involvedObject`); `field_path` names a part of it, as
    `spec.containers{web}` does for one container of a pod."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    field_path: str = ""

    def as_json(self) -> dict[str, str]:
        out = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
            "fieldPath": self.field_path,
        }
        return {k: v for k, v in out.items() if v}


def reference(obj: Mapping[str, Any], api_version: str, kind: str, field_path: str = "") -> ObjectRef:
    """The reference to a stored object; its kind is given because a listed item has none."""
    meta = obj.get("metadata") or {}
    return ObjectRef(
        api_version,
        kind,
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        str(meta.get("resourceVersion") or ""),
        field_path,
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_Key = tuple[ObjectRef, str, str, str]  # (the object without its resourceVersion, type, reason, message)


class _SpamFilter:
    """A token bucket per involved object."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._buckets: OrderedDict[tuple[str, ...], tuple[float, float]] = OrderedDict()  # key -> (tokens, at)

    def allow(self, ref: ObjectRef) -> bool:
        key = (ref.api_version, ref.kind, ref.namespace, ref.name, ref.uid)
        now = self.clock()
        tokens, at = self._buckets.get(key, (float(SPAM_BURST), now))
        tokens = min(float(SPAM_BURST), tokens + (now - at) / SPAM_REFILL_S)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > REMEMBERED:
            self._buckets.popitem(last=False)
        return allowed


class EventRecorder:
    """Writes `component`'s events (`source.component`, `reportingComponent`); `instance` is
    its `reportingInstance` and `host` its `source.host` (a kubelet's node)."""

    def __init__(
        self,
        client: RestClient,
        component: str,
        instance: str,
        *,
        host: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.component = component
        self.instance = instance
        self.host = host
        self._seen: OrderedDict[_Key, tuple[str, int]] = OrderedDict()  # -> (event name, count)
        self._tasks: set[asyncio.Task[None]] = set()
        self._locks: dict[_Key, asyncio.Lock] = {}
        self._spam = _SpamFilter(clock)
        self.dropped = 0  # over MAX_PENDING
        self.filtered = 0  # by the spam filter

    def record(self, ref: ObjectRef, event_type: str, reason: str, message: str, action: str = "") -> None:
        """Report an event about `ref` (in the background)."""
        if len(self._tasks) >= MAX_PENDING:
            self.dropped += 1
            return
        if not self._spam.allow(ref):
            self.filtered += 1
            return
        task = asyncio.create_task(self._emit(ref, event_type, reason, action, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait (at most `timeout`) for the events recorded so far to be written."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)

    async def _emit(self, ref: ObjectRef, event_type: str, reason: str, action: str, message: str) -> None:
        key: _Key = (
            ObjectRef(ref.api_version, ref.kind, ref.namespace, ref.name, ref.uid, "", ref.field_path),
            event_type,
            reason,
            message,
        )
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                await self._write(key, ref, event_type, reason, action, message)
        except (ApiError, TransportError) as e:
            log.warning("could not record event %s for %s %s/%s: %s", reason, ref.kind, ref.namespace, ref.name, e)
        finally:
            if not lock.locked():
                self._locks.pop(key, None)

    async def _write(self, key: _Key, ref: ObjectRef, event_type: str, reason: str, action: str, message: str) -> None:
        # events of a cluster-scoped object (a Node) live in "default", as kube's do
        namespace = ref.namespace or "default"
        now = _now()
        seen = self._seen.get(key)
        if seen is not None:
            event_name, count = seen
            try:
                await self.client.patch(
                    path_of("", "v1", "events", namespace, event_name), {"count": count + 1, "lastTimestamp": now}
                )
                self._seen[key] = (event_name, count + 1)
                self._seen.move_to_end(key)
                return
            except NotFoundError:
                pass  # expired (events have a TTL): write a new one
        event_name = f"{ref.name}.{uuid.uuid4().hex[:16]}"
        source = {"component": self.component, **({"host": self.host} if self.host else {})}
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name, "namespace": namespace},
            "involvedObject": ref.as_json(),
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": source,
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        if action:
            body["action"] = action
        await self.client.create(path_of("", "v1", "events", namespace), body)
        self._seen[key] = (event_name, 1)
        while len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
