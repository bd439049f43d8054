"""Slow watchers: one raftkube member serving 1,000 watchers on a prefix under full write load,
10 of them on connections that never read.

Each run, on a fresh cluster, goes through two stages under the same write load
(`watch_writers` in flight to the leader):

1. back-up (`slow_backup_s`): only the 10 never-reading watchers are on the member.  With so
   few watchers the member can send them every event, so their connections fill up: the
   client's receive queue, the member's kernel send queue, then the member's own buffer up to
   where it stops sending to them (PAUSE_BYTES in store/server/watch_streams.py).  With
   1,000 watchers from the start they would get only what the member's fan-out leaves per
   watcher (tens of events a second) and take minutes to reach that point, so a run of
   seconds would never show what a slow reader costs.
2. the 990 reading watchers join; after `slow_warmup_s` the delivery to them is counted for
   `watch_s` seconds.

The baseline run is the same without the never-reading watchers.  `slow_rounds` pairs of
runs, the order alternating from pair to pair; the medians are compared.  Each run samples
the watched member's RSS (VmRSS from /proc/<pid>/status) every 0.1 s from before the first
watcher connects to the end.  Targets: the peak RSS with the slow ones stays under 512 MiB,
and the median delivery with them stays at 80 % or more of the median without.  Delivery
swings by tens of percent from run to run on a shared 2-core machine (the member is
CPU-bound and gets what the neighbours leave), hence the pairs; events per member
CPU-second are given too, which the neighbours disturb less.

The watchers sit on a follower (the leader is busy with the writes).  The reading watchers
run in `clients` load generator processes of their own (one connection each, every watch on
it), the never-reading ones in another (one raw connection and one watch each: see
loadgen.stall), the writers in a third; the driver only reads /proc and, from a thread, the
member's /metrics.  The cluster runs with TLS, as `raftkube store up` does, unless --tls off.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
import urllib.request
from typing import Any

from bench.store import procs
from bench.store.context import Context
from bench.store.loadrun import STARTUP_S, LoadProcess
from bench.store.peers import Peer

SAMPLE_S = 0.1
"""How often the driver reads the member's RSS."""
METRICS_S = 1.0
"""How often a thread of the driver reads the member's /metrics (it may take seconds to answer)."""
RSS_TRACE_S = 0.5
"""The RSS trace kept in the results has one point per this many seconds."""


def run(ctx: Context) -> dict[str, Any]:
    ctx.progress.start("slow-watchers")
    s = ctx.sizes
    total, stalled = s.slow_watchers, min(s.slow_stalled, s.slow_watchers - 1)
    tls = ctx.tls != "off"
    runs: list[dict[str, Any]] = []
    for i in range(max(1, s.slow_rounds)):
        order = (0, stalled) if i % 2 == 0 else (stalled, 0)
        for k in order:
            runs.append(one_run(ctx, total - stalled, k, tls) | {"round": i})
    without = [r for r in runs if not r["stalled"]]
    slow = [r for r in runs if r["stalled"]]
    base = statistics.median(r["events_per_s"] for r in without)
    ratio = statistics.median(r["events_per_s"] for r in slow) / base if base else None
    base_cpu = statistics.median(r["events_per_member_cpu_s"] for r in without)
    ratio_cpu = statistics.median(r["events_per_member_cpu_s"] for r in slow) / base_cpu if base_cpu else None
    # What the never-reading watchers cost in memory: RSS with them minus without, per pair
    # (both grow with the store's history under the writes, which nothing compacts here).
    pairs = [(a, b) for a in slow for b in without if a["round"] == b["round"]]
    extra_join = statistics.median(a["rss_at_join_mib"] - b["rss_at_join_mib"] for a, b in pairs)
    extra_peak = statistics.median(a["rss_peak_mib"] - b["rss_peak_mib"] for a, b in pairs)
    ctx.progress.end(
        f"delivery with {stalled} never-reading watchers {100 * ratio:.0f} % of without"
        if ratio is not None
        else "no events delivered"
    )
    return {
        "seconds": s.watch_s,
        "warmup_s": s.slow_warmup_s,
        "backup_s": s.slow_backup_s,
        "writers_in_flight": s.watch_writers,
        "watchers": total,
        "stalled": stalled,
        "reading": total - stalled,
        "tls": tls,
        "rounds": max(1, s.slow_rounds),
        "runs": runs,
        # Median events/s to the reading watchers with the never-reading ones / median without.
        "delivery_ratio": ratio,
        "delivery_per_cpu_ratio": ratio_cpu,
        "rss_peak_mib": max(r["rss_peak_mib"] for r in slow),
        "rss_peak_without_mib": max(r["rss_peak_mib"] for r in without),
        "rss_extra_at_join_mib": extra_join,
        "rss_extra_peak_mib": extra_peak,
    }


def one_run(ctx: Context, reading: int, stalled: int, tls: bool) -> dict[str, Any]:
    s = ctx.sizes
    with ctx.cluster("raftkube", "slow-watchers", tls=tls) as peer:
        leader = peer.leader()
        member = peer.followers(leader)[0]
        pid = peer.pid(member)
        if pid is None:
            raise RuntimeError(f"raftkube member {member} is not running")
        label = f"{peer.label} {reading} reading + {stalled} never-reading watchers"
        prefix = "/bench/slow/"
        endpoint = peer.endpoint(member)
        port = int(endpoint.rsplit(":", 1)[1])
        rss_idle = procs.vm_rss_bytes(pid)
        ctx.progress.update(f"{label}: watchers on member m{member}, pid {pid} (for a profiler)")
        t_backup = time.monotonic() + STARTUP_S
        t_start = t_backup + s.slow_backup_s
        t = {"t_start": t_start, "t_measure": t_start + s.slow_warmup_s, "t_end": t_start + s.slow_warmup_s + s.watch_s}
        common = peer.client_spec() | {"prefix": prefix, "value_size": s.value_size} | t
        nproc = max(1, min(s.clients, reading))
        per = [reading // nproc + (1 if i < reading % nproc else 0) for i in range(nproc)]
        gens: list[LoadProcess] = []
        metrics = _MetricsSampler(peer, member)
        leader_metrics = _MetricsSampler(peer, leader)
        try:
            readers = [
                LoadProcess(
                    common | {"mode": "watch", "endpoints": [endpoint], "watch_endpoint": endpoint, "watchers": n},
                    ctx.log(f"{peer.label}-slow-readers"),
                )
                for n in per
            ]
            gens += readers
            staller = None
            if stalled:
                staller = LoadProcess(
                    common
                    | {"mode": "stall", "endpoints": [endpoint], "watch_endpoint": endpoint}
                    | {"watchers": stalled, "t_start": t_backup, "t_end": t["t_end"] + 30},  # until stopped
                    ctx.log(f"{peer.label}-stalled"),
                )
                gens.append(staller)
            writer = LoadProcess(
                common
                | {"mode": "write", "endpoints": ctx.write_endpoints(peer, leader), "concurrency": s.watch_writers}
                | {"keyspace": s.keyspace, "t_start": t_backup + 0.3},
                ctx.log(f"{peer.label}-slow-writer"),
            )
            gens.append(writer)
            metrics.start()
            leader_metrics.start()
            samples: list[tuple[float, int]] = []
            cpu0 = cpu1 = 0.0
            queued_at_join: dict[int, int] = {}
            queued_at_end: dict[int, int] = {}
            while True:
                now = time.monotonic()
                samples.append((now - t_backup, procs.vm_rss_bytes(pid)))
                if not queued_at_join and now >= t_start - 0.2:
                    # Only the never-reading connections are on the member's client port now.
                    queued_at_join = procs.tcp_send_queues(port) or {0: 0}
                if not queued_at_end and now >= t["t_end"] - 0.2:
                    queued_at_end = procs.tcp_send_queues(port) or {0: 0}
                if not cpu0 and now >= t["t_measure"]:
                    cpu0 = procs.cpu_seconds(pid)
                if now >= t["t_end"]:
                    cpu1 = procs.cpu_seconds(pid)
                    break
                stage = (
                    "never-reading watchers backing up"
                    if now < t_start
                    else "warming up"
                    if now < t["t_measure"]
                    else f"{t['t_end'] - now:4.1f}s left"
                )
                ctx.progress.update(f"{label}: {stage}, RSS {samples[-1][1] / 2**20:.0f} MiB", transient=True)
                time.sleep(SAMPLE_S)
            stall_res = staller.result(timeout=30) if staller is not None else None
            got = [g.result(timeout=30) for g in readers]
            wr = writer.result(timeout=30)
        finally:
            metrics.stop()
            leader_metrics.stop()
            for g in gens:
                procs.kill(g.pid, wait=1.0)
    window = max(r["window_s"] for r in got)
    events = sum(r["events"] for r in got)
    writes_per_s = wr["ops"] / wr["window_s"]
    t_rel = {k: v - t_backup for k, v in t.items()}
    r: dict[str, Any] = {
        "reading": reading,
        "stalled": stalled,
        "events": events,
        "events_per_s": events / window,
        "writes_per_s": writes_per_s,
        "write_errors": wr["errors"],
        # Every write is due to every reading watcher: the fraction they were given.
        "delivered_fraction": events / window / (writes_per_s * reading) if writes_per_s and reading else 0.0,
        "watchers_opened_s": max(x.get("opened_at", t_start) for x in got) - t_start,
        "rss_idle_mib": rss_idle / 2**20,
        "rss_peak_mib": max(rss for _, rss in samples) / 2**20,
        "rss_at_join_mib": max((rss for at, rss in samples if at <= t_rel["t_start"]), default=0) / 2**20,
        "rss_end_mib": samples[-1][1] / 2**20,
        "rss_trace_mib": _trace(samples),
        "stages_s": t_rel,
        "member_cpu_pct": 100.0 * (cpu1 - cpu0) / window,
        "events_per_member_cpu_s": events / (cpu1 - cpu0) if cpu1 > cpu0 else 0.0,
        "watcher_client_cpu_pct": sum(x["client_cpu_pct"] for x in got),
        "watcher_processes": len(got),
        "writer_client_cpu_pct": wr["client_cpu_pct"],
        "watchers_on_member": metrics.last("raftkube_watchers", before=t["t_end"]),
        "watchers_trace": [[round(at - t_backup, 1), v] for at, v in metrics.series("raftkube_watchers")],
        "cut_off_connections": metrics.last("raftkube_watch_slow_connections_total"),
        # The watched member applies what the leader commits only as fast as its watch fan-out
        # (in the apply path) lets it: revisions it applied per second while the readers were on
        # it (its /metrics answers take seconds then, so the samples are sparse), and how far
        # behind the leader's revision it was at the end.
        "member_applied_per_s": _rate(metrics.series("raftkube_mvcc_revision"), t_start + 0.5, t["t_end"]),
        "member_behind_at_end": _behind(leader_metrics, metrics, t["t_end"]),
    }
    if stall_res is not None:
        ports = stall_res["local_ports"]
        r["stalled_connections"] = stall_res["connections"]
        # Per never-reading connection: bytes in the member's kernel send queue, when the reading
        # watchers joined and at the end, and unread in our receive queue at the end.  Beyond
        # these the member keeps up to PAUSE_BYTES per connection in its own buffers.
        r["stalled_member_send_queue_at_join"] = [queued_at_join.get(p, 0) for p in ports]
        r["stalled_member_send_queue_at_end"] = [queued_at_end.get(p, 0) for p in ports]
        r["stalled_unread_at_end"] = stall_res["unread_bytes"]
    ctx.progress.update(
        f"{label}: {r['events_per_s']:,.0f} events/s at {writes_per_s:,.0f} writes/s, "
        f"RSS peak {r['rss_peak_mib']:.0f} MiB"
    )
    return r


def _rate(series: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """Growth per second of a sampled counter between the first and last sample within [t0, t1]."""
    inside = [(at, v) for at, v in series if t0 <= at <= t1]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def _behind(leader: _MetricsSampler, member: _MetricsSampler, at: float) -> float | None:
    """Leader's revision minus the member's, from the samples of each nearest to `at`."""
    values = []
    for m in (leader, member):
        series = m.series("raftkube_mvcc_revision")
        if not series:
            return None
        values.append(min(series, key=lambda s: abs(s[0] - at))[1])
    return values[0] - values[1]


def _trace(samples: list[tuple[float, int]]) -> list[list[float]]:
    """[seconds since the back-up stage began, RSS MiB], one point per RSS_TRACE_S (each slot's peak)."""
    slots: dict[int, float] = {}
    for at, rss in samples:
        k = int(at / RSS_TRACE_S)
        slots[k] = max(slots.get(k, 0.0), rss / 2**20)
    return [[round(k * RSS_TRACE_S, 1), round(v, 1)] for k, v in sorted(slots.items())]


class _MetricsSampler:
    """Reads the member's /metrics every METRICS_S in a thread of the driver: a member busy with
    1,000 watchers answers late (same event loop), and the RSS sampling must not wait for it."""

    def __init__(self, peer: Peer, member: int) -> None:
        url = getattr(peer, "http_url", None)
        self.url = url(member) + "/metrics" if url is not None else None
        self.samples: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow-watchers-metrics", daemon=True)

    def start(self) -> None:
        if self.url is not None:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=15)

    def _run(self) -> None:
        assert self.url is not None
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=10) as resp:
                    self.samples.append((time.monotonic(), resp.read().decode()))
            except OSError:
                pass
            self._stop.wait(METRICS_S)

    def series(self, name: str) -> list[tuple[float, float]]:
        out = []
        pattern = re.compile(rf"^{re.escape(name)} (\S+)$", re.M)
        for at, text in list(self.samples):
            m = pattern.search(text)
            if m:
                out.append((at, float(m.group(1))))
        return out

    def last(self, name: str, before: float | None = None) -> float | None:
        values = [v for at, v in self.series(name) if before is None or at <= before]
        return values[-1] if values else None
