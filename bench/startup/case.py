"""One start-up case: `pods` pods created at `rate` pods/s (0: as fast as they go) on `nodes`
hollow nodes, from a fresh store and apiserver.

Processes, each its own (as `raftkube up` runs them): 3 store members (fsync on) and one
apiserver (bench.apiserver.backends), the scheduler, the controller-manager with only its
nodelifecycle controller (it lifts the not-ready taint every new node starts with, as in
kube), and `raftkube hollow-nodes --count <nodes>`.  The driver (this process) waits for every
hollow Node Ready and untainted, opens a watch on the pods and one on the node Leases, creates
the pods (a plain pod with one container, no requests; the serviceaccount controller runs
too, for the namespace's default account) and waits until its watch saw every pod
Running.  Per pod: created (the create answered) -> Running seen; per process: CPU over the
measured window and peak RSS; per node: the longest wait between Lease renewals.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apiserver.pki import component_kubeconfig
from bench.apiserver import backends
from bench.apiserver.backends import Backend
from bench.startup.watch import NAMESPACE, LeaseWatch, PodWatch
from bench.store import procs
from bench.store.loadrun import percentile
from bench.store.progress import Progress
from components.client import kubeconfig
from components.client.rest import AlreadyExistsError, ApiError, RestClient, TransportError
from machinery.process.launch import free_ports

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "hollow-"
READY_TIMEOUT_S = 180.0
CREATE_WORKERS = 16


class CaseError(Exception):
    """A process died or the cluster did not get ready in time."""


@dataclass(frozen=True)
class Case:
    pods: int
    nodes: int
    rate: float  # pods/s; 0: full speed
    lease_window_s: float = 30.0
    """Leases are judged over at least this long: three renewals of every node by default;
    a smoke run takes one (--lease-window)."""

    @property
    def key(self) -> str:
        return f"{self.pods}x{self.nodes}@{self.rate:g}" if self.rate else f"{self.pods}x{self.nodes}@max"

    @property
    def label(self) -> str:
        speed = f"{self.rate:g} pods/s" if self.rate else "full speed"
        return f"{self.pods:,} pods at {speed} on {self.nodes:,} hollow nodes"


def _spawn(name: str, argv: list[str], root: Path) -> tuple[str, int]:
    proc = procs.spawn([sys.executable, "-m", "components.cli", *argv], log=root / f"{name}.log", cwd=ROOT)
    return name, proc.pid


def run(case: Case, root: Path, config: Path | None, progress: Progress) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    progress.start(case.label)
    progress.update("starting the store (3 members) and the apiserver")
    backend = backends.start("raftkube", root, config)
    try:
        return asyncio.run(_measure(case, backend, root, progress))
    finally:
        backend.stop()
        procs.kill_all()


async def _measure(case: Case, backend: Backend, root: Path, progress: Progress) -> dict[str, Any]:
    load_start = list(os.getloadavg())
    data_dir, url = backend.apiserver.data_dir, backend.endpoint.url
    configs = {c: component_kubeconfig(data_dir, c, server=url) for c in ("admin", "scheduler", "hollow-nodes")}
    configs["controller-manager"] = component_kubeconfig(data_dir, "controller-manager", server=url)
    pids = dict(
        [
            _spawn("scheduler", ["scheduler", "--kubeconfig", str(configs["scheduler"]), "--no-leader-elect"], root),
            _spawn(
                "controller-manager",
                [
                    "controller-manager",
                    "--kubeconfig",
                    str(configs["controller-manager"]),
                    "--no-leader-elect",
                    "--controllers",
                    "nodelifecycle,serviceaccount",
                ],
                root,
            ),
        ]
    )
    hollow_started = time.time()
    name, pid = _spawn(
        "hollow-nodes",
        [
            "hollow-nodes",
            "--kubeconfig",
            str(configs["hollow-nodes"]),
            "--count",
            str(case.nodes),
            "--prefix",
            PREFIX,
            "--health-port",
            str(free_ports(1)[0]),
        ],
        root,
    )
    pids[name] = pid
    async with RestClient(kubeconfig.load(configs["admin"]), timeout=60.0, max_connections=CREATE_WORKERS + 4) as admin:
        ready_s = await _nodes_ready(admin, case, pids, hollow_started, progress)
        with_store = {**pids, "apiserver": backend.pid}
        store_pids = backend.store_pids()
        cpu0 = {n: procs.cpu_seconds(p) for n, p in with_store.items()}
        store0 = sum(procs.cpu_seconds(p) for p in store_pids)
        rv = (await admin.get(f"/api/v1/namespaces/{NAMESPACE}/pods", {"limit": 1}))["metadata"]["resourceVersion"]
        leases_rv = (await admin.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {"limit": 1}))[
            "metadata"
        ]["resourceVersion"]
        pods, leases = PodWatch(admin), LeaseWatch(admin, PREFIX)
        pods.start(rv)
        leases.start(leases_rv)
        window_start = time.time()
        try:
            created = await _create(admin, case, pods, pids, progress)
            outcome = await _until_running(case, pods, pids, progress)
            while time.time() - window_start < case.lease_window_s:
                progress.update("watching Lease renewals", transient=True)
                await asyncio.sleep(0.5)
            window_end = time.time()
            cpu1 = {n: procs.cpu_seconds(p) for n, p in with_store.items()}
            store1 = sum(procs.cpu_seconds(p) for p in store_pids)
            gaps = sorted(leases.gaps(window_start, window_end))
            lease_error, pod_error = leases.error, pods.error
        finally:
            await pods.stop()
            await leases.stop()
    wall = window_end - window_start
    latencies = sorted(pods.running_at[n] - t for n, t in created.items() if n in pods.running_at)
    processes = {
        n: {"cpu_pct": 100.0 * (cpu1[n] - cpu0[n]) / wall, "peak_rss_mib": procs.peak_rss_bytes(p) / 2**20}
        for n, p in with_store.items()
    }
    processes["store (3 members)"] = {
        "cpu_pct": 100.0 * (store1 - store0) / wall,
        "peak_rss_mib": sum(procs.peak_rss_bytes(p) for p in store_pids) / 2**20,
    }
    result: dict[str, Any] = {
        "pods": case.pods,
        "nodes": case.nodes,
        "rate": case.rate,
        "outcome": outcome,
        "complete": len(latencies) == case.pods,
        "pods_running": len(latencies),
        "nodes_ready_s": ready_s,
        "p50_ms": 1e3 * percentile(latencies, 0.50),
        "p99_ms": 1e3 * percentile(latencies, 0.99),
        "max_ms": 1e3 * latencies[-1] if latencies else None,
        "latency_from": "the driver's create answered -> the driver's watch sees phase Running",
        "latencies_ms": [round(1e3 * x, 1) for x in latencies],
        "lease": {
            "nodes_renewing": len(leases.renewals),
            "window_s": wall,
            "max_gap_s": gaps[-1] if gaps else None,
            "p99_gap_s": percentile(gaps, 0.99) if gaps else None,
            "nodes_with_gap_over_15s": sum(1 for g in gaps if g > 15.0),
        },
        "processes": processes,
        "load_average_at_start": load_start,
        "load_average_at_end": list(os.getloadavg()),
    }
    for what, err in (("lease watch", lease_error), ("pod watch", pod_error)):
        if err:
            result[f"{what} error"] = err
    progress.end(
        f"p50 {result['p50_ms']:,.0f} ms, p99 {result['p99_ms']:,.0f} ms, {len(latencies):,}/{case.pods:,} Running; "
        f"nodes Ready in {ready_s:.1f}s; longest Lease gap {result['lease']['max_gap_s'] or 0:.1f}s"
    )
    return result


def _check_alive(pids: dict[str, int]) -> None:
    for name, pid in pids.items():
        if not procs.alive(pid):
            raise CaseError(f"the {name} exited; see its log")


async def _nodes_ready(
    admin: RestClient, case: Case, pids: dict[str, int], started: float, progress: Progress
) -> float:
    """Seconds from the hollow-nodes process start until every hollow Node is Ready without taints."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        _check_alive(pids)
        nodes = (await admin.get("/api/v1/nodes", {"labelSelector": "raftkube.io/hollow=true"}))["items"]
        ready = sum(
            1
            for n in nodes
            if not (n.get("spec") or {}).get("taints")
            and any(
                c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or ()
            )
        )
        if ready >= case.nodes:
            return time.time() - started
        if time.monotonic() > deadline:
            raise CaseError(f"{ready}/{case.nodes} hollow nodes Ready within {READY_TIMEOUT_S:.0f}s")
        progress.update(f"hollow nodes Ready: {ready:,}/{case.nodes:,}", transient=True)
        await asyncio.sleep(0.5)


async def _create(
    admin: RestClient, case: Case, pods: PodWatch, pids: dict[str, int], progress: Progress
) -> dict[str, float]:
    """Create the pods at the case's rate; pod name -> when its create was answered."""
    with contextlib.suppress(AlreadyExistsError):
        await admin.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    deadline = time.monotonic() + 30.0
    while True:  # pods need the namespace's default service account (its controller makes it)
        try:
            await admin.get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
            break
        except ApiError:
            if time.monotonic() > deadline:
                raise CaseError("no default service account in the namespace within 30 s") from None
            await asyncio.sleep(0.2)
    created: dict[str, float] = {}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(case.pods):
        queue.put_nowait(i)
    start = time.monotonic()

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            if case.rate:
                due = start + i / case.rate
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
            name = f"startup-{i}"
            body = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "pause:3.9"}]}}
            for _attempt in range(5):
                try:
                    await admin.create(f"/api/v1/namespaces/{NAMESPACE}/pods", body)
                    break
                except (ApiError, TransportError):  # 429 under load, a broken connection: once more
                    await asyncio.sleep(0.2)
            created[name] = time.time()

    workers = [asyncio.create_task(worker()) for _ in range(CREATE_WORKERS if not case.rate else 4)]
    while not all(w.done() for w in workers):
        _check_alive(pids)
        progress.update(f"created {len(created):,}/{case.pods:,}, Running {len(pods.running_at):,}", transient=True)
        await asyncio.sleep(0.5)
    for w in workers:
        w.result()
    return created


async def _until_running(case: Case, pods: PodWatch, pids: dict[str, int], progress: Progress) -> str:
    deadline = time.monotonic() + max(60.0, case.pods / 10)
    while len(pods.running_at) < case.pods:
        _check_alive(pids)
        if pods.error:
            return pods.error
        if time.monotonic() > deadline:
            return f"{len(pods.running_at):,}/{case.pods:,} Running when time ran out"
        progress.update(f"Running {len(pods.running_at):,}/{case.pods:,}", transient=True)
        await asyncio.sleep(0.2)
    return "complete"
