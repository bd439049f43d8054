"""core/v1 Events from the scheduler, as kube-scheduler reports them (`source.component` and
`reportingComponent` "default-scheduler").  A repeat of the same reason and message for the same
pod bumps `count` and `lastTimestamp` of the event already written instead of creating another.
Recording never blocks scheduling: events go out from background tasks, at most `MAX_PENDING`
at once (more are dropped and counted, as client-go's broadcaster drops on a full channel)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from datetime import UTC, datetime

from components.client.rest import ApiError, NotFoundError, RestClient, TransportError, path_of
from components.scheduler.nodeinfo import DEFAULT_SCHEDULER
from machinery.objects import Obj

log = logging.getLogger("raftkube.scheduler.events")
MAX_PENDING = 1000
REMEMBERED = 4096


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(self, client: RestClient, instance: str) -> None:
        self.client = client
        self.instance = instance
        self._seen: OrderedDict[tuple[str, str, str, str], tuple[str, int]] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._locks: dict[tuple[str, str, str, str], asyncio.Lock] = {}
        self.dropped = 0

    def record(self, pod: Obj, event_type: str, reason: str, action: str, message: str) -> None:
        if len(self._tasks) >= MAX_PENDING:
            self.dropped += 1
            return
        task = asyncio.create_task(self._emit(pod, event_type, reason, action, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self, timeout: float = 5.0) -> None:
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)

    async def _emit(self, pod: Obj, event_type: str, reason: str, action: str, message: str) -> None:
        meta = pod.get("metadata") or {}
        ns, name, uid = meta.get("namespace") or "default", meta.get("name") or "", meta.get("uid") or ""
        key = (ns, uid or name, reason, message)
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                await self._write(key, pod, event_type, reason, action, message)
        except (ApiError, TransportError) as e:
            log.warning("could not record event %s for %s/%s: %s", reason, ns, name, e)
        finally:
            if not lock.locked():
                self._locks.pop(key, None)

    async def _write(
        self, key: tuple[str, str, str, str], pod: Obj, event_type: str, reason: str, action: str, message: str
    ) -> None:
        ns = key[0]
        now = _now()
        seen = self._seen.get(key)
        if seen is not None:
            event_name, count = seen
            try:
                await self.client.patch(
                    path_of("", "v1", "events", ns, event_name), {"count": count + 1, "lastTimestamp": now}
                )
                self._seen[key] = (event_name, count + 1)
                self._seen.move_to_end(key)
                return
            except NotFoundError:
                pass  # expired (events have a TTL): write a new one
        meta = pod.get("metadata") or {}
        event_name = f"{meta.get('name')}.{uuid.uuid4().hex[:16]}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name, "namespace": ns},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": ns,
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "action": action,
            "source": {"component": DEFAULT_SCHEDULER},
            "reportingComponent": DEFAULT_SCHEDULER,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self.client.create(path_of("", "v1", "events", ns), body)
        self._seen[key] = (event_name, 1)
        while len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
