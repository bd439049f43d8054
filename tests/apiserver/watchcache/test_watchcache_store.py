"""The watch cache over a real 3-member store that loses its leader mid-stream: every watcher
sees exactly the store's own events, filtered by its selectors (ADDED when an object starts
matching, DELETED when it stops), without gap, duplicate or reordering.

The truth is the store's history itself, read back after the run by a fresh storage watch
from the same start revision; the expected stream of each watcher is computed from it here,
independently of the cache's code."""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from apiserver.resources import catalog
from apiserver.resources.base import object_fields
from apiserver.storage import open_storage
from apiserver.storage.interface import AmbiguousError, StorageEvent, UnavailableError
from apiserver.watchcache import Cacher
from machinery.selectors import FieldSelector, LabelSelector
from tests.support.cluster import StoreCluster, running_cluster

PODS = next(r for r in catalog() if r.plural == "pods")
WATCHERS: list[tuple[str | None, str, str]] = [
    (None, "", ""),
    ("ns-a", "", ""),
    (None, "tier=web", ""),
    ("ns-b", "tier in (web,db)", ""),
    (None, "", "spec.nodeName=n1"),
    (None, "!tier", "metadata.name=p3"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    with running_cluster(tmp_path_factory.mktemp("wcstore")) as tc:
        yield tc


def pod(ns: str, name: str, rng: random.Random) -> bytes:
    labels = {} if rng.random() < 0.3 else {"tier": rng.choice(["web", "db", "cache"])}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if rng.random() < 0.6:
        spec["nodeName"] = rng.choice(["n1", "n2"])
    return orjson.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec}
    )


def expected(events: list[StorageEvent], ns: str | None, labels: str, fields: str) -> list[tuple[str, str, int]]:
    lsel = LabelSelector.parse(labels) if labels else None
    fsel = FieldSelector.parse(fields) if fields else None

    def match(value: bytes | None) -> bool:
        if value is None:
            return False
        obj = orjson.loads(value)
        meta = obj["metadata"]
        if ns is not None and meta["namespace"] != ns:
            return False
        if lsel is not None and not lsel.matches(meta.get("labels") or {}):
            return False
        return fsel is None or fsel.matches(object_fields(PODS, obj))

    out = []
    for e in events:
        name = orjson.loads(e.value)["metadata"]["name"]
        if e.type == "delete":
            if match(e.value):
                out.append(("DELETED", name, e.revision))
            continue
        now, before = match(e.value), match(e.prev_value)
        if now and before:
            out.append(("MODIFIED", name, e.revision))
        elif now:
            out.append(("ADDED", name, e.revision))
        elif before:
            out.append(("DELETED", name, e.revision))
    return out


def test_watchers_see_exactly_the_stores_events_across_a_leader_kill(store: StoreCluster) -> None:
    url = "raftkube://" + ",".join(e.split("://")[-1] for e in store.endpoints)
    rng = random.Random(7)

    async def scenario() -> tuple[list[list[tuple[str, str, int]]], list[StorageEvent], list[bool]]:
        storage = open_storage(url, tls=store.tls)
        cacher = Cacher(storage, PODS, fields_of=functools.partial(object_fields, PODS), fresh_timeout=20)
        await cacher.start()
        try:
            start = await storage.current_revision()
            watchers = [
                await cacher.watch(
                    namespace=ns,
                    labels=LabelSelector.parse(ls) if ls else None,
                    fields=FieldSelector.parse(fs) if fs else None,
                    resource_version=str(start),
                )
                for ns, ls, fs in WATCHERS
            ]
            live: dict[str, int] = {}
            for step in range(240):
                if step == 80:
                    leader = await asyncio.to_thread(store.wait_leader)
                    store.local.kill_member(leader)
                name = f"p{rng.randrange(12)}"
                ns = rng.choice(["ns-a", "ns-b"])
                key = PODS.key(ns, name)
                try:
                    if key in live and rng.random() < 0.3:
                        await storage.delete(key, live.pop(key))
                    elif key in live:
                        live[key] = await storage.update(key, pod(ns, name, rng), live[key])
                    else:
                        live[key] = await storage.create(key, pod(ns, name, rng))
                except (AmbiguousError, UnavailableError):
                    stored = await storage.get(key)  # whatever happened, carry on from the truth
                    if stored is None:
                        live.pop(key, None)
                    else:
                        live[key] = stored.revision
            end = await storage.current_revision()
            truth: list[StorageEvent] = []
            async for batch in storage.watch(PODS.key_prefix(), start + 1):
                assert isinstance(batch, list)
                truth.extend(batch)
                if batch[-1].revision >= end:
                    break
            seen: list[list[tuple[str, str, int]]] = []
            ended: list[bool] = []
            for (ns_, ls_, fs_), w in zip(WATCHERS, watchers, strict=True):
                want = expected(truth, ns_, ls_, fs_)
                got: list[tuple[str, str, int]] = []
                errored = False
                while len(got) < len(want) + 1:
                    try:
                        # past what is expected, only look at what is already queued (an extra event)
                        event = await asyncio.wait_for(w.__anext__(), 20) if len(got) < len(want) else w.poll()
                    except (StopAsyncIteration, TimeoutError):
                        break
                    if event is None:
                        break
                    if event.type == "ERROR":
                        errored = True
                        break
                    if event.type == "BOOKMARK":
                        continue
                    meta = event.object["metadata"]
                    got.append((event.type, meta["name"], int(meta["resourceVersion"])))
                seen.append(got)
                ended.append(errored)
                w.close()
            return seen, truth, ended
        finally:
            await cacher.stop()
            await storage.close()

    seen, truth, ended = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert len(truth) > 150
    for (ns, ls, fs), got, errored in zip(WATCHERS, seen, ended, strict=True):
        want = expected(truth, ns, ls, fs)
        if errored:  # allowed: a prefix of the truth, then an ERROR (the client re-lists)
            assert got == want[: len(got)], (ns, ls, fs)
        else:
            assert got == want, (ns, ls, fs)
