"""What every phase needs: sizes, the temp dir, the progress line, load generators, profiles."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.apiserver.backends import Backend, BackendError
from bench.store import procs
from bench.store.loadrun import LoadProcess, percentile, server_cpu
from bench.store.progress import Progress

LOADGEN = "bench.apiserver.loadgen"
SPY_RATE = 97
"""py-spy samples per second (prime, so as not to beat with periodic work)."""
NAMESPACES = 10
"""Pods are spread over this many namespaces (bench-0 ...), created once per backend."""


@dataclass
class Sizes:
    """The full run's sizes; --quick shrinks them, the flags (and tests) shrink them further."""

    fanout_nodes: int = 1000
    """(a) one watcher per node, fieldSelector=spec.nodeName=node-i."""
    fanout_unfiltered: int = 10
    fanout_pods: int = 10_000
    fanout_rate: float = 500.0
    """(a) pod creates per second (open loop)."""
    throughput_watchers: int = 100
    """(b) unfiltered watchers while writers go as fast as they can."""
    throughput_s: float = 10.0
    writers_in_flight: int = 64
    list_pods: int = 10_000
    """(c) pods in the cluster for the LISTs (topped up when fewer exist)."""
    list_requests: int = 20
    create_s: float = 10.0
    """(d) measured seconds of creates at `writers_in_flight`."""
    warmup_s: float = 1.0
    client_requests: int = 2000
    """client: GETs per HTTP client for the client-cost comparison."""
    clients: int = 2
    """Load generator processes for watchers and for closed-loop writers."""
    watch_http2: bool = False
    """(a), (b), (f): each watcher process carries its watches as streams of HTTP/2 connections
    (up to 200 a connection), as client-go does, instead of a connection per watch."""
    memory_steps: tuple[int, ...] = (10_000, 100_000)
    """(g) pods added in all at each reading of the apiserver's RSS."""
    memory_settle_s: float = 3.0
    """(g) seconds after the last write before the RSS is read (the cache applies, a GC runs)."""
    gate_orders: int = 2
    """(e) the chains measured in order and then in reverse (ABBA, so drift falls on both);
    a quick run measures them once, in order: its figures are a smoke test, not a result."""

    @staticmethod
    def quick() -> Sizes:
        return Sizes(
            fanout_nodes=100,
            fanout_pods=1000,
            throughput_watchers=20,
            throughput_s=3.0,
            list_pods=1000,
            create_s=3.0,
            warmup_s=0.5,
            client_requests=600,
            gate_orders=1,
            memory_steps=(1_000, 5_000),
            memory_settle_s=1.0,
        )


@dataclass
class Context:
    root: Path
    sizes: Sizes
    progress: Progress
    profile_dir: Path | None = None
    """With --profile: py-spy records the apiserver during each phase's measured window."""
    logs: Path = field(init=False)
    _seq: int = 0

    def __post_init__(self) -> None:
        self.logs = self.root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def log(self, name: str) -> Path:
        self._seq += 1
        return self.logs / f"{self._seq:03d}-{name}.log"

    def loadgen(self, backend: Backend, spec: dict[str, Any], label: str) -> LoadProcess:
        spec = spec | {"target": backend.target.to_json(), "system": backend.name}
        return LoadProcess(spec, self.log(f"{backend.name}-{label}"), module=LOADGEN)

    def collect(self, gens: list[LoadProcess], timeout: float) -> list[dict[str, Any]]:
        """Every generator's result; all are killed by pid whatever happens."""
        try:
            return [g.result(timeout=timeout) for g in gens]
        finally:
            for g in gens:
                procs.kill(g.pid, wait=1.0)

    @staticmethod
    def kill(gens: list[LoadProcess]) -> None:
        """End generators by pid (a phase that failed half way leaves none behind)."""
        for g in gens:
            procs.kill(g.pid, wait=1.0)

    # ------------------------------------------------------------------ set-up requests
    def ensure_namespaces(self, backend: Backend) -> list[str]:
        names = [f"bench-{i}" for i in range(NAMESPACES)]
        for ns in names:
            body = orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            r = backend.request("POST", "/api/v1/namespaces", body)
            if r.status not in (201, 409):
                raise BackendError(f"creating namespace {ns}: HTTP {r.status} {r.body[:200]!r}")
        return names

    def add_pods(
        self, backend: Backend, count: int, namespaces: list[str], label: str, timeout: float
    ) -> dict[str, Any]:
        """`count` pods created as fast as the server takes them (`writers_in_flight` in flight,
        spread over `namespaces` and 1,000 nodes), for phases that need pods in the cluster
        rather than a measured rate; the generator's result (ops answered, errors)."""
        run_id = f"{label[:4]}{int(time.time() * 1000) % 10**8}"
        spec = {
            "mode": "create",
            "connections": self.sizes.writers_in_flight,
            "run": run_id,
            "prefix": run_id,
            "nodes": 1000,
            "namespaces": namespaces,
            "rate": 1e9,
            "count": count,
            "t_start": time.monotonic(),
            "drain_s": 120.0,
        }
        (done,) = self.collect([self.loadgen(backend, spec, label)], timeout=timeout)
        return done

    def pods_now(self, backend: Backend, collection: str = "/api/v1/pods") -> tuple[str, int]:
        """(resourceVersion, number of objects) from a LIST served by the watch cache: of pods,
        or of the kind at `collection`."""
        r = backend.request("GET", f"{collection}?resourceVersion=0")
        if r.status != 200:
            raise BackendError(f"LIST {collection}: HTTP {r.status} {r.body[:200]!r}")
        doc = orjson.loads(r.body)
        return str(doc["metadata"]["resourceVersion"]), len(doc["items"])

    # ------------------------------------------------------------------ watchers
    def wait_ready(self, paths: list[Path], timeout: float, label: str) -> dict[str, Any]:
        """Wait (bounded) until every watcher process wrote its ready file; opened and failures."""
        t0 = time.monotonic()
        while not all(p.exists() for p in paths):
            if time.monotonic() - t0 > timeout:
                raise BackendError(f"{label}: watchers not open after {timeout:.0f}s")
            self.progress.update(f"{label}: opening watches ({time.monotonic() - t0:.0f}s)", transient=True)
            time.sleep(0.1)
        time.sleep(0.05)  # the file is written whole, but give the writer a moment to close it
        docs = [json.loads(p.read_text()) for p in paths]
        return {
            "opened": sum(d["opened"] for d in docs),
            "failures": [f for d in docs for f in d["failures"]],
            "open_s": time.monotonic() - t0,
        }

    @staticmethod
    def tell(gens: list[LoadProcess], line: str) -> None:
        for g in gens:
            assert g.proc.stdin is not None
            g.proc.stdin.write(line.encode() + b"\n")
            g.proc.stdin.flush()

    # ------------------------------------------------------------------ measuring
    @contextlib.contextmanager
    def measuring(self, backend: Backend, phase: str) -> Iterator[dict[str, Any]]:
        """CPU of the apiserver and of the store over the block, its peak RSS, and (with
        --profile) a py-spy profile of the apiserver; the figures land in the yielded dict."""
        out: dict[str, Any] = {}
        store = backend.store_pids()
        a0, s0, t0 = procs.cpu_seconds(backend.pid), server_cpu(store), time.monotonic()
        spy = self.spy_start(backend.pid, f"{backend.name}-{phase}")
        try:
            yield out
        finally:
            wall = max(1e-9, time.monotonic() - t0)
            out["apiserver_cpu_pct"] = 100.0 * (procs.cpu_seconds(backend.pid) - a0) / wall
            out["store_cpu_pct"] = 100.0 * (server_cpu(store) - s0) / wall
            out["apiserver_rss_mib"] = procs.vm_rss_bytes(backend.pid) / 2**20
            out["load_average"] = list(os.getloadavg())
            if spy is not None:
                out["profile"] = self.spy_stop(spy)

    def spy_start(self, pid: int, name: str) -> tuple[Any, Path, float] | None:
        """With --profile: py-spy starts recording process `pid` into <profiles>/<name>.txt."""
        if self.profile_dir is None:
            return None
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        path = self.profile_dir / f"{name}.txt"
        argv = [exe, "record", "--pid", str(pid), "--format", "raw", "--rate", str(SPY_RATE), "--nonblocking"]
        proc = procs.spawn([*argv, "-o", str(path)], log=self.log(f"py-spy-{name}"))
        return proc, path, time.monotonic()

    def spy_stop(self, spy: tuple[Any, Path, float]) -> dict[str, Any]:
        """The recording's summary (see bench.apiserver.profile), after py-spy wrote it."""
        from bench.apiserver.profile import summarise

        proc, path, t0 = spy
        seconds = time.monotonic() - t0
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGINT)  # py-spy writes its file on SIGINT
        try:
            proc.wait(timeout=20)
        except Exception:
            procs.kill(proc.pid)
        procs.kill(proc.pid, wait=0.5)
        if not path.exists():
            return {"file": str(path), "error": f"py-spy wrote nothing (see {self.logs})"}
        return {"file": str(path)} | summarise(path.read_text(), seconds, SPY_RATE)


def latency_ms(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "p50_ms": 1e3 * percentile(s, 0.50),
        "p99_ms": 1e3 * percentile(s, 0.99),
        "max_ms": 1e3 * s[-1] if s else 0.0,
    }
