"""One cluster chaos run: up, the workload under faults drawn from the seed, a quiet time for
the cluster to converge, the end marker, the store's history, the checks, down, the report.

    raftkube chaos cluster --seed 7 --duration 60 --faults kill,pause
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos import checks
from bench.chaos.checks import Check
from bench.chaos.cluster import ChaosCluster
from bench.chaos.faults import FaultRecord, fault_loop
from bench.chaos.history import read_history
from bench.chaos.workload import (
    CONFIGMAPS,
    DEPLOYMENTS,
    END_MARKER,
    JOBS,
    NAMESPACE,
    Op,
    Shaper,
    Watcher,
    WatchRecord,
    Writer,
    admin_config,
    setup,
)
from components.client.rest import ApiError, RestClient, TransportError

CONVERGE_S = 90.0
"""How long the cluster has, after the last fault, to run every Deployment as asked and finish every Job."""
END_WAIT_S = 30.0


@dataclass
class Settings:
    seed: int
    duration: float = 60.0
    faults: list[str] = field(default_factory=list)
    gap: tuple[float, float] = (3.0, 8.0)
    writers: int = 4
    keys: int = 4
    pace: float = 0.1
    deployments: int = 2
    apiservers: int = 2
    canary: str = ""
    mixed: bool = False
    hosts: str = "local"


@dataclass
class Outcome:
    settings: Settings
    checks: list[Check]
    faults: list[FaultRecord]
    ops: list[Op]
    watches: list[WatchRecord]
    elapsed: float
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


async def run(settings: Settings, data_dir: Path) -> Outcome:
    rng = random.Random(settings.seed)
    cluster = ChaosCluster(data_dir, apiservers=settings.apiservers, canary=settings.canary, hosts=settings.hosts)
    started = time.monotonic()
    await asyncio.to_thread(cluster.up)
    notes: list[str] = []
    try:
        outcome = await _under_faults(cluster, settings, rng, started, notes)
    except BaseException:
        await asyncio.to_thread(cluster.down)
        raise
    said = await asyncio.to_thread(cluster.down)
    notes.append(f"down: {said.splitlines()[-1] if said else 'nothing said'}")
    left = await asyncio.to_thread(cluster.left_behind)
    outcome.checks.append(
        Check("no process left behind", [f"pid {p} still runs after down" for p in left], len(cluster.seen_pids))
    )
    outcome.elapsed = time.monotonic() - started
    return outcome


async def _under_faults(
    cluster: ChaosCluster, s: Settings, rng: random.Random, started: float, notes: list[str]
) -> Outcome:
    admin = admin_config(cluster.kubeconfig)
    async with RestClient(admin, user_agent="chaos-admin", timeout=10.0) as client:
        await setup(client, s.deployments)
        t0 = time.monotonic()
        until = t0 + s.duration
        stop_watching = asyncio.Event()
        watchers = [Watcher(admin_config(cluster.kubeconfig, url), url) for url in cluster.apiserver_urls()]
        watching = [asyncio.create_task(w.run(stop_watching)) for w in watchers]
        await _until_listed(watchers)  # every stream is watched from before the first write
        writers = [
            Writer(
                i,
                RestClient(admin, user_agent=f"chaos-writer-{i}", timeout=10.0),
                s.keys,
                random.Random(rng.random()),
                t0,
            )
            for i in range(s.writers)
        ]
        scaler = Shaper(client, s.deployments, random.Random(rng.random()))
        await scaler.start_job()  # one at least, however short the run
        injecting = asyncio.create_task(
            fault_loop(cluster, s.faults, random.Random(rng.random()), t0, until, s.gap, s.mixed)
        )
        try:
            await asyncio.gather(*(w.run(until, s.pace) for w in writers), scaler.run(until, 5.0))
            faults = await injecting
        finally:
            injecting.cancel()  # a pause under way is continued (faults.inject)
            await asyncio.gather(injecting, return_exceptions=True)
            for w in writers:
                await w.client.close()
        cluster.note_pids()
        converged = await _converge(client, scaler, notes)
        end_rv = await _end_marker(client)
        await _until_seen(watchers, end_rv)
        stop_watching.set()
        for task in watching:
            task.cancel()
        await asyncio.gather(*watching, return_exceptions=True)
        finals = await _final_lists(cluster)
    history = await read_history(cluster.data_dir, f"/registry/configmaps/{NAMESPACE}/{END_MARKER}")
    ops = [o for w in writers for o in w.ops]
    found = [
        checks.acknowledged_writes(ops, history),
        checks.watch_streams([w.record for w in watchers], history),
        checks.final_lists(finals, history),
        checks.lease_safety(history),
        checks.scheduling_by_the_leader(history),
        checks.pods_bound_once(history),
        checks.deployment_surge(history),
        checks.jobs_within_completions(history),
        converged,
    ]
    for watcher in watchers:
        notes += [f"{watcher.record.apiserver}: {e}" for e in watcher.errors[:3]]
    return Outcome(s, found, faults, ops, [w.record for w in watchers], time.monotonic() - started, notes)


async def _converge(client: RestClient, scaler: Shaper, notes: list[str]) -> Check:
    """Every Deployment runs as many ready pods as finally asked for, within CONVERGE_S."""
    deadline = time.monotonic() + CONVERGE_S
    last: list[str] = []
    while time.monotonic() < deadline:
        last = []
        try:
            for name in scaler.names:
                d = await client.get(f"{DEPLOYMENTS}/{name}")
                want = d["spec"]["replicas"]
                if name not in scaler.unknown and want != scaler.wanted[name]:
                    last.append(f"{name}: spec.replicas {want}, but {scaler.wanted[name]} was acknowledged last")
                    continue
                st = d.get("status") or {}
                pods = await client.get(f"/api/v1/namespaces/{NAMESPACE}/pods", {"labelSelector": f"app={name}"})
                live = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
                if st.get("readyReplicas", 0) != want or st.get("replicas", 0) != want or len(live) != want:
                    said = f"status {st.get('replicas')}/{st.get('readyReplicas')} ready, {len(live)} pods"
                    last.append(f"{name}: want {want}, {said}")
            for job in scaler.jobs:
                j = await client.get(f"{JOBS}/{job}")
                conditions = (j.get("status") or {}).get("conditions") or []
                if not any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions):
                    last.append(f"{job}: not Complete ({(j.get('status') or {}).get('succeeded', 0)} succeeded)")
        except (ApiError, TransportError) as e:
            last = [f"reading: {e}"]
        if not last:
            notes.append(f"converged {CONVERGE_S - (deadline - time.monotonic()):.1f} s after the last fault")
            return Check("Deployments and Jobs converge after the faults", [], len(scaler.names) + len(scaler.jobs))
        await asyncio.sleep(1.0)
    bad = [f"not within {CONVERGE_S:.0f} s: {x}" for x in last]
    return Check("Deployments and Jobs converge after the faults", bad, len(scaler.names) + len(scaler.jobs))


async def _end_marker(client: RestClient) -> int:
    for _ in range(60):
        try:
            made = await client.create(CONFIGMAPS, {"metadata": {"name": END_MARKER}, "data": {"seq": "end"}})
            return int(made["metadata"]["resourceVersion"])
        except (ApiError, TransportError):
            await asyncio.sleep(0.5)
    raise RuntimeError("could not write the end marker for 30 s")


async def _until_listed(watchers: list[Watcher]) -> None:
    deadline = time.monotonic() + END_WAIT_S
    while time.monotonic() < deadline and not all(w.record.segments for w in watchers):
        await asyncio.sleep(0.05)


async def _until_seen(watchers: list[Watcher], rv: int) -> None:
    deadline = time.monotonic() + END_WAIT_S
    while time.monotonic() < deadline and any(w.record.last_rv() < rv for w in watchers):
        await asyncio.sleep(0.2)


async def _final_lists(cluster: ChaosCluster) -> dict[str, tuple[int, dict[str, str]]]:
    finals: dict[str, tuple[int, dict[str, str]]] = {}
    for url in cluster.apiserver_urls():
        async with RestClient(admin_config(cluster.kubeconfig, url), timeout=10.0) as c:
            listed: dict[str, Any] = await c.get(CONFIGMAPS)
        items = {o["metadata"]["name"]: (o.get("data") or {}).get("seq", "") for o in listed["items"]}
        finals[url] = (int(listed["metadata"]["resourceVersion"]), items)
    return finals
