"""What users and controllers do during a cluster chaos run, recorded for the checks.

- Writers: each owns a few ConfigMaps and creates, updates and deletes them with
  resourceVersion preconditions, each write carrying a unique `seq`; every answer is recorded:
  ok (with the resourceVersion it returned), refused (a 4xx: it must never be applied), or
  unknown (the connection broke, a timeout, a 5xx: it may or may not have been).  Writers go
  through our client library with every apiserver listed, so they fail over.
- Watchers: one on each apiserver (that apiserver only), watching the ConfigMaps from a LIST's
  resourceVersion, every event recorded; a broken stream is watched again from the last
  resourceVersion on the same apiserver (a gap there is a violation), a 410 starts a new
  segment from a new LIST (allowed: the client was told).
- The shaper: Deployments scaled between 1 and 4 replicas and rolled (a new template) now and
  then, and Jobs of 4 completions 2 at a time whose pods (on hollow nodes) run 2 s: the
  controllers and the scheduler must follow through faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.client import kubeconfig
from components.client.kubeconfig import ClientConfig
from components.client.rest import ApiError, GoneError, RestClient, TransportError, path_of

NAMESPACE = "chaos"
CONFIGMAPS = path_of("", "v1", "configmaps", NAMESPACE)
DEPLOYMENTS = path_of("apps", "v1", "deployments", NAMESPACE)
JOBS = path_of("batch", "v1", "jobs", NAMESPACE)
JOB_COMPLETIONS = 4
RUN_SECONDS = "fake.raftkube.io/run-seconds"  # the hollow nodes' fake runtime ends the container then
END_MARKER = "zz-end-of-run"
REQUEST_TIMEOUT_S = 10.0


@dataclass
class Op:
    writer: int
    key: str
    kind: str  # create, update, delete
    seq: str
    started: float
    ended: float = 0.0
    outcome: str = ""  # ok, refused, unknown
    rv: int = 0
    detail: str = ""


@dataclass
class WatchEvent:
    type: str
    key: str
    rv: int
    seq: str


@dataclass
class Segment:
    """One LIST and the watch events after it, until a 410 (or the end)."""

    list_rv: int
    listed: dict[str, str]  # name -> seq
    events: list[WatchEvent] = field(default_factory=list)
    breaks: int = 0  # streams broken and resumed from the last resourceVersion
    ended_by: str = "end of run"


@dataclass
class WatchRecord:
    apiserver: str
    segments: list[Segment] = field(default_factory=list)

    def last_rv(self) -> int:
        s = self.segments[-1] if self.segments else None
        if s is None:
            return 0
        return s.events[-1].rv if s.events else s.list_rv


def admin_config(path: Path, only: str | None = None) -> ClientConfig:
    """The admin's client config; `only`: that one apiserver, no failover."""
    config = kubeconfig.load(path)
    return dataclasses.replace(config, server=only, servers=(only,)) if only else config


def _rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


async def setup(client: RestClient, deployments: int) -> None:
    await _retry(lambda: client.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}), exists_ok=True)
    for i in range(deployments):
        await _retry(lambda i=i: client.create(DEPLOYMENTS, _deployment(f"web-{i}", 2)), exists_ok=True)


async def start_job(client: RestClient, name: str) -> None:
    await _retry(lambda: client.create(JOBS, _job(name)), exists_ok=True)


def _job(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "completions": JOB_COMPLETIONS,
            "parallelism": 2,
            "backoffLimit": 20,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS: "2"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "command": ["true"]}],
                },
            },
        },
    }


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]},
            },
        },
    }


async def _retry(call: Any, exists_ok: bool = False, attempts: int = 60) -> Any:
    for _ in range(attempts):
        try:
            return await call()
        except ApiError as e:
            if exists_ok and e.code == 409:
                return None
            if e.code < 500 and e.code != 429:
                raise
        except TransportError:
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError("gave up after retrying for 30 s")


class Writer:
    def __init__(self, index: int, client: RestClient, keys: int, rng: random.Random, t0: float) -> None:
        self.index, self.client, self.rng, self.t0 = index, client, rng, t0
        self.keys = [f"cm-{index}-{k}" for k in range(keys)]
        self.known: dict[str, int | None] = dict.fromkeys(self.keys)  # resourceVersion, None: absent
        self.ops: list[Op] = []
        self.count = 0

    async def run(self, until: float, pace: float) -> None:
        while time.monotonic() < until:
            await self.one()
            await asyncio.sleep(self.rng.uniform(0, 2 * pace))

    async def one(self) -> None:
        key = self.rng.choice(self.keys)
        self.count += 1
        seq = f"w{self.index}-{self.count}"
        rv = self.known[key]
        if rv is None:
            op = Op(self.index, key, "create", seq, self._now())
            call = self.client.create(CONFIGMAPS, {"metadata": {"name": key}, "data": {"seq": seq}})
        elif self.rng.random() < 0.8:
            op = Op(self.index, key, "update", seq, self._now())
            body = {"metadata": {"name": key, "resourceVersion": str(rv)}, "data": {"seq": seq}}
            call = self.client.replace(f"{CONFIGMAPS}/{key}", body)
        else:
            op = Op(self.index, key, "delete", seq, self._now())
            call = self.client.delete(f"{CONFIGMAPS}/{key}", {"preconditions": {"resourceVersion": str(rv)}})
        try:
            answer = await asyncio.wait_for(call, REQUEST_TIMEOUT_S)
            op.outcome = "ok"
            op.rv = _rv(answer) if answer.get("metadata", {}).get("resourceVersion") else 0
            self.known[key] = None if op.kind == "delete" else op.rv
        except ApiError as e:
            op.outcome, op.detail = ("unknown" if e.code >= 500 else "refused"), f"{e.code} {e.reason}"
        except (TransportError, TimeoutError) as e:
            op.outcome, op.detail = "unknown", f"{type(e).__name__}: {str(e)[:200]}"
        op.ended = self._now()
        self.ops.append(op)
        if op.outcome != "ok":
            await self._resync(key)

    async def _resync(self, key: str) -> None:
        """What the key holds now (after a refusal or an unknown outcome)."""
        for _ in range(120):
            try:
                got = await asyncio.wait_for(self.client.get(f"{CONFIGMAPS}/{key}"), REQUEST_TIMEOUT_S)
                self.known[key] = _rv(got)
                return
            except ApiError as e:
                if e.code == 404:
                    self.known[key] = None
                    return
            except (TransportError, TimeoutError):
                pass
            await asyncio.sleep(0.25)

    def _now(self) -> float:
        return time.monotonic() - self.t0


class Watcher:
    def __init__(self, config: ClientConfig, apiserver: str) -> None:
        self.config = config
        self.record = WatchRecord(apiserver)
        self.errors: list[str] = []

    async def run(self, stop: asyncio.Event) -> None:
        async with RestClient(self.config, user_agent="chaos-watcher", timeout=REQUEST_TIMEOUT_S) as client:
            while not stop.is_set():
                segment = await self._list(client, stop)
                if segment is None:
                    return
                self.record.segments.append(segment)
                await self._follow(client, segment, stop)

    async def _list(self, client: RestClient, stop: asyncio.Event) -> Segment | None:
        while not stop.is_set():
            try:
                listed = await client.get(CONFIGMAPS)
                items = {o["metadata"]["name"]: (o.get("data") or {}).get("seq", "") for o in listed["items"]}
                return Segment(int(listed["metadata"]["resourceVersion"]), items)
            except (ApiError, TransportError) as e:
                self.errors.append(f"list: {e}"[:200])
                await asyncio.sleep(0.5)
        return None

    async def _follow(self, client: RestClient, segment: Segment, stop: asyncio.Event) -> None:
        while not stop.is_set():
            since = segment.events[-1].rv if segment.events else segment.list_rv
            try:
                async for e in client.watch(CONFIGMAPS, {"resourceVersion": since, "timeoutSeconds": 30}):
                    if e.type == "BOOKMARK":
                        continue
                    meta = e.object.get("metadata") or {}
                    seq = (e.object.get("data") or {}).get("seq", "")
                    segment.events.append(WatchEvent(e.type, meta.get("name", ""), int(meta["resourceVersion"]), seq))
                    if stop.is_set():
                        return
            except GoneError:
                segment.ended_by = "410"
                return
            except (ApiError, TransportError) as e:
                segment.breaks += 1
                self.errors.append(f"watch: {e}"[:200])
                await asyncio.sleep(0.5)


class Shaper:
    """Scales and rolls the Deployments, starts Jobs."""

    def __init__(self, client: RestClient, deployments: int, rng: random.Random) -> None:
        self.client, self.rng = client, rng
        self.names = [f"web-{i}" for i in range(deployments)]
        self.wanted: dict[str, int] = dict.fromkeys(self.names, 2)
        self.unknown: set[str] = set()
        self.jobs: list[str] = []
        self.rollouts = 0

    async def start_job(self) -> None:
        self.jobs.append(f"job-{len(self.jobs)}")
        await start_job(self.client, self.jobs[-1])

    async def run(self, until: float, every: float) -> None:
        while time.monotonic() + every < until:
            await asyncio.sleep(self.rng.uniform(0.5 * every, 1.5 * every))
            if self.rng.random() < 0.25:
                with contextlib.suppress(RuntimeError, ApiError):
                    await self.start_job()
                continue
            name = self.rng.choice(self.names)
            patch: dict[str, Any]
            if self.rng.random() < 0.3:  # a rollout: a new template
                self.rollouts += 1
                patch = {"spec": {"template": {"metadata": {"annotations": {"chaos/rollout": str(self.rollouts)}}}}}
            else:
                patch = {"spec": {"replicas": self.rng.randint(1, 4)}}
            try:
                await asyncio.wait_for(self.client.patch(f"{DEPLOYMENTS}/{name}", patch), REQUEST_TIMEOUT_S)
                if "replicas" in patch["spec"]:
                    self.wanted[name] = patch["spec"]["replicas"]
                    self.unknown.discard(name)
            except (ApiError, TransportError, TimeoutError):
                if "replicas" in patch["spec"]:
                    self.unknown.add(name)  # read back at the end: it may have been applied
