"""What every phase needs: the systems to compare, the sizes, a temp dir, the progress line."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.store import procs
from bench.store.adapters import make_adapter
from bench.store.loadrun import LoadProcess, merge_closed_loop, server_cpu, start_together, wait_until
from bench.store.peers import Peer, make_peer
from bench.store.progress import Progress


@dataclass
class Sizes:
    """Durations and sizes; --quick shrinks them (and tests shrink them further)."""

    write_levels: tuple[int, ...] = (1, 16, 64, 256)
    write_s: float = 10.0
    warmup_s: float = 1.0
    read_concurrency: int = 64
    read_s: float = 5.0
    watchers: tuple[int, ...] = (1, 10, 100)
    watch_s: float = 5.0
    watch_writers: int = 64
    catchup_events: int = 100_000
    slow_watchers: int = 1000
    """slow-watchers: watchers on one member, of which `slow_stalled` never read."""
    slow_stalled: int = 10
    slow_warmup_s: float = 5.0
    """slow-watchers: load before the window, for the never-reading connections to back up."""
    slow_backup_s: float = 10.0
    """slow-watchers: writes with only the never-reading watchers on the member, before the others join."""
    slow_rounds: int = 3
    """slow-watchers: pairs of runs (without, with the never-reading watchers); medians are compared."""
    kills: int = 10
    restart_keys: int = 100_000
    restart_value: int = 1024
    value_size: int = 256
    keyspace: int = 10_000
    clients: int = 2
    """Load generator processes for 16+ requests in flight (one process for 1 in flight)."""

    @staticmethod
    def quick() -> Sizes:
        return Sizes(
            write_s=3.0,
            warmup_s=0.5,
            read_s=2.0,
            watch_s=3.0,
            catchup_events=10_000,
            kills=3,
            restart_keys=20_000,
            slow_warmup_s=3.0,
            slow_backup_s=6.0,
            slow_rounds=1,
        )


@dataclass
class Context:
    root: Path
    systems: list[str]
    members: int
    sizes: Sizes
    progress: Progress
    config: Path | None = None
    tls: str = "off"
    """both: the write phase runs raftkube and etcd with and without TLS, slow-watchers with TLS,
    the other phases without; on: every phase with TLS; off: every phase without (pysyncobj,
    which has no TLS, always runs without)."""
    logs: Path = field(init=False)
    _seq: int = 0

    def __post_init__(self) -> None:
        self.logs = self.root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def log(self, name: str) -> Path:
        self._seq += 1
        return self.logs / f"{self._seq:03d}-{name}.log"

    def tls_variants(self, system: str) -> list[bool]:
        """With and/or without TLS, for a phase that shows both (the writes)."""
        if system == "pysyncobj":
            return [False]
        return {"both": [False, True], "on": [True], "off": [False]}[self.tls]

    @contextlib.contextmanager
    def cluster(self, system: str, phase: str, tls: bool | None = None) -> Iterator[Peer]:
        """A fresh cluster of `system` for one phase, killed by pid when the phase ends.
        `tls` None: with TLS only when every phase runs with it (--tls on)."""
        if tls is None:
            tls = self.tls == "on"
        tls = tls and system != "pysyncobj"
        self._seq += 1
        peer = make_peer(system, self.root / f"{self._seq:03d}-{phase}", self.members, self.config, tls)
        self.progress.update(f"starting {peer.label} ({self.members} members)")
        try:
            peer.start(timeout=60)
            yield peer
        finally:
            peer.stop()

    def write_endpoints(self, peer: Peer, leader: int) -> list[str]:
        """Endpoints for writers: the leader first (raftkube's client finds it by itself anyway)."""
        if peer.name == "pysyncobj":
            return [peer.endpoint(leader)]
        return [peer.endpoint(leader)] + [peer.endpoint(m) for m in peer.followers(leader)]

    def closed_loop(
        self,
        peer: Peer,
        mode: str,
        concurrency: int,
        duration: float,
        endpoints: list[str],
        label: str,
        **extra: Any,
    ) -> dict[str, Any]:
        """Run `concurrency` requests in flight for `duration` s; throughput, latency, client and server CPU."""
        nproc = 1 if concurrency < 16 else max(1, min(self.sizes.clients, concurrency))
        base = (
            peer.client_spec()
            | {
                "endpoints": endpoints,
                "mode": mode,
                "value_size": self.sizes.value_size,
                "keyspace": self.sizes.keyspace,
            }
            | {"barrier": True}
            | extra
        )
        per = [concurrency // nproc + (1 if i < concurrency % nproc else 0) for i in range(nproc)]
        gens = [LoadProcess(base | {"concurrency": c}, self.log(f"{peer.label}-{mode}")) for c in per]
        try:
            t = start_together(gens, self.sizes.warmup_s, duration)
            wait_until(t["t_measure"], lambda: self.progress.update(f"{label}: warming up", transient=True))
            pids = peer.pids()
            cpu0 = server_cpu(pids)
            wait_until(
                t["t_end"],
                lambda: self.progress.update(f"{label}: {t['t_end'] - time.monotonic():4.1f}s left", transient=True),
            )
            cpu1 = server_cpu(pids)
            results = [g.result(timeout=30) for g in gens]
        finally:
            for g in gens:
                procs.kill(g.pid, wait=1.0)
        merged = merge_closed_loop(results)
        merged["concurrency"] = concurrency
        merged["server_cpu_s"] = cpu1 - cpu0
        merged["server_cpu_pct"] = 100.0 * (cpu1 - cpu0) / merged["window_s"]
        merged["server_cpu_ms_per_op"] = 1e3 * (cpu1 - cpu0) / merged["ops"] if merged["ops"] else 0.0
        return merged

    def fill(
        self, peer: Peer, endpoints: list[str], prefix: str, count: int, value_size: int, label: str
    ) -> dict[str, Any]:
        """Write `count` keys once (64 in flight); returns first/last revision, rate and server CPU."""
        spec = peer.client_spec() | {
            "endpoints": endpoints,
            "mode": "fill",
            "prefix": prefix,
            "count": count,
            "value_size": value_size,
            "concurrency": 64,
            "timeout_s": 900,
        }
        pids = peer.pids()
        cpu0 = server_cpu(pids)
        t0 = time.monotonic()
        g = LoadProcess(spec, self.log(f"{peer.label}-fill"))
        try:
            while g.proc.poll() is None and time.monotonic() - t0 < 960:
                self.progress.update(f"{label}: writing {count:,} keys ({time.monotonic() - t0:.0f}s)", transient=True)
                time.sleep(0.25)
            res = g.result(timeout=30)
        finally:
            procs.kill(g.pid, wait=1.0)
        res["server_cpu_s"] = server_cpu(pids) - cpu0
        res["ops_per_s"] = count / res["window_s"]
        return res

    def wait_value(self, peer: Peer, member: int, key: bytes, value: bytes, timeout: float) -> float:
        """Seconds until `member` answers a serializable read of `key` with `value` (polled every 5 ms)."""
        return asyncio.run(_wait_value(peer, member, key, value, timeout))


async def _wait_value(peer: Peer, member: int, key: bytes, value: bytes, timeout: float) -> float:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    deadline = t0 + timeout
    last = ""
    while loop.time() < deadline:
        adapter = make_adapter(peer.protocol, [peer.endpoint(member)], timeout=0.5, tls=peer.client_tls)
        try:
            got = await adapter.get(key, serializable=True)
            if got == value:
                return loop.time() - t0
            last = f"value {got[:16] if got else got!r}..."
        except Exception as e:
            last = f"{type(e).__name__}: {e}"
        finally:
            with contextlib.suppress(Exception):
                await adapter.close()
        await asyncio.sleep(0.005)
    raise TimeoutError(f"{peer.label} member {member} did not serve {key!r} within {timeout:.0f}s (last: {last})")
