"""Shared by the watch-cache tests: a fake clock, tiny selectors, a pod resource, object makers."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Mapping
from typing import Any

import orjson

from apiserver.resources.base import ResourceDef
from apiserver.watchcache import CacheWatcher, WatchEvent

PODS = ResourceDef(
    group="",
    version="v1",
    kind="Pod",
    plural="pods",
    singular="pod",
    namespaced=True,
    fields=lambda obj: {"spec.nodeName": str((obj.get("spec") or {}).get("nodeName") or "")},
    field_selectors=("spec.nodeName",),
)


class FakeClock:
    """Time moves only when a test calls `advance`."""

    def __init__(self) -> None:
        self.t = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.t + seconds, next(self._seq), fut))
        await fut

    async def advance(self, seconds: float) -> None:
        self.t += seconds
        while self._sleepers and self._sleepers[0][0] <= self.t:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
        for _ in range(5):
            await asyncio.sleep(0)


class Labels:
    """Equality-only label selector (the real one is machinery.selectors.LabelSelector)."""

    def __init__(self, **want: str) -> None:
        self.want = want

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.want.items())

    def empty(self) -> bool:
        return not self.want


class Fields:
    """Equality-only field selector; a missing field reads as ""."""

    def __init__(self, want: dict[str, str]) -> None:
        self.want = want

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(fields.get(k, "") == v for k, v in self.want.items())

    def exact(self, field: str) -> str | None:
        return self.want.get(field)

    def empty(self) -> bool:
        return not self.want


def pod(name: str, ns: str = "default", *, node: str = "", app: str = "", n: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if app:
        meta["labels"] = {"app": app}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": node, "n": n}}


def key(name: str, ns: str = "default") -> str:
    return f"/registry/pods/{ns}/{name}"


def enc(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj)


def summary(events: list[WatchEvent]) -> list[tuple[str, str, str]]:
    """(type, name, resourceVersion) per event, for compact assertions."""
    out: list[tuple[str, str, str]] = []
    for e in events:
        meta = e.object.get("metadata") or {}
        out.append((e.type, str(meta.get("name", "")), str(meta.get("resourceVersion", ""))))
    return out


async def drain(watcher: CacheWatcher) -> list[WatchEvent]:
    """Every event the watcher has ready now, after letting the cache run a little."""
    for _ in range(3):
        await asyncio.sleep(0)
    got: list[WatchEvent] = []
    while (event := watcher.poll()) is not None:
        got.append(event)
    return got
