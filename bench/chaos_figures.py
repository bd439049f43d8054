"""Failover figures of issue 4 (3 members, heartbeat 100 ms, election 1000 ms):

* leader SIGKILL, N times: time to a new leader and to the first successful write (median, p99);
* minority failure: throughput of clients on the healthy majority against the baseline;
* a restarted member catching up (log and snapshot);
* every member killed (losing un-fsynced bytes) and restarted: acknowledged writes present.

    python -m bench.chaos_figures [--kills 20]

Prints figures; targets are in the issue and the README, never asserted here.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from store.api.errors import StoreError
from store.chaos.cluster import ChaosCluster
from store.chaos.scenario import PROFILES
from store.client.client import Client
from store.config import StoreSettings


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def writer(urls: list[str], stop: asyncio.Event, log: list[tuple[float, float]], key: bytes) -> None:
    """A closed-loop writer recording (start, end) of each success."""
    c = Client(urls, timeout=1.0)
    i = 0
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                await c.put(key, b"%d" % i)
                log.append((t0, time.monotonic()))
            except StoreError:
                await asyncio.sleep(0.01)
            i += 1
    finally:
        await c.close()


async def leader_kills(cc: ChaosCluster, n: int) -> tuple[list[float], list[float]]:
    to_leader, to_write = [], []
    for _ in range(n):
        lead = await cc.leader(timeout=15)
        stop = asyncio.Event()
        log: list[tuple[float, float]] = []
        w = asyncio.create_task(writer(cc.client_urls(), stop, log, b"/fig/kill"))
        await asyncio.sleep(0.5)
        t_kill = time.monotonic()
        await asyncio.to_thread(cc.kill, lead, True)
        new = 0
        survivors = [i for i in cc.ids() if i != lead]
        t_new = t_kill
        while not new and time.monotonic() - t_kill < 15:
            t_ask = time.monotonic()
            st = await cc.statuses(only=survivors)  # the dead member would set the poll's pace
            new = next((i for i, s in st.items() if s is not None and s["role"] == "leader"), 0)
            # The poll that first sees the leader takes a few ms: count its midpoint.
            t_new = (t_ask + time.monotonic()) / 2
            if not new:
                await asyncio.sleep(0.01)
        to_leader.append(t_new - t_kill)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(s >= t_kill for s, _ in log):
            await asyncio.sleep(0.01)
        firsts = [e for s, e in log if s >= t_kill]
        to_write.append((min(firsts) - t_kill) if firsts else float("inf"))
        stop.set()
        await w
        await asyncio.to_thread(cc.restart, lead)
        print(
            f"  kill {len(to_leader)}: leader {lead} -> {new}: {to_leader[-1]:.2f}s to a leader, "
            f"{to_write[-1]:.2f}s to a write",
            flush=True,
        )
        await cc.wait_revision(0, 5)
    return to_leader, to_write


async def throughput(urls: list[str], seconds: float, key: bytes, clients: int = 8) -> float:
    stop = asyncio.Event()
    logs: list[list[tuple[float, float]]] = [[] for _ in range(clients)]
    tasks = [asyncio.create_task(writer(urls, stop, logs[i], key + b"%d" % i)) for i in range(clients)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    return sum(len(x) for x in logs) / seconds


async def minority(cc: ChaosCluster) -> tuple[float, float, int]:
    base = await throughput(cc.client_urls(), 3, b"/fig/base")
    lead = await cc.leader()
    victim = next(i for i in cc.ids() if i != lead)
    await asyncio.to_thread(cc.kill, victim, True)
    healthy = [cc.client_url(i) for i in cc.ids() if i != victim]
    stop = asyncio.Event()
    failures = 0
    c = Client(healthy, timeout=1.0)
    ok = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3:
        try:
            await c.put(b"/fig/minority", b"%d" % ok)
            ok += 1
        except StoreError:
            failures += 1
    await c.close()
    stop.set()
    during = await throughput(healthy, 3, b"/fig/minority")
    await asyncio.to_thread(cc.restart, victim)
    return base, during, failures


async def catch_up(cc: ChaosCluster, entries: int) -> float:
    lead = await cc.leader()
    victim = next(i for i in cc.ids() if i != lead)
    await asyncio.to_thread(cc.kill, victim, True)
    c = Client(cc.client_urls(), timeout=2.0)
    sem = asyncio.Semaphore(64)

    async def put(i: int) -> None:
        async with sem:
            await c.put(b"/fig/catch/%06d" % i, b"x" * 100)

    await asyncio.gather(*(put(i) for i in range(entries)))
    st = await cc.statuses()
    target = max(s["revision"] for s in st.values() if s is not None)
    await c.close()
    t0 = time.monotonic()
    await asyncio.to_thread(cc.restart, victim)
    deadline = t0 + 60
    while time.monotonic() < deadline:
        s = (await cc.statuses()).get(victim)
        if s is not None and s["revision"] >= target:
            return time.monotonic() - t0
        await asyncio.sleep(0.05)
    return float("inf")


async def kill_all(cc: ChaosCluster, writes: int) -> tuple[int, int]:
    c = Client(cc.client_urls(), timeout=2.0)
    acked: dict[bytes, bytes] = {}
    for i in range(writes):
        k, v = b"/fig/all/%05d" % i, b"v%d" % i
        try:
            await c.put(k, v)
            acked[k] = v
        except StoreError:
            pass
    await c.close()
    for m in cc.ids():
        await asyncio.to_thread(cc.kill, m, True)
    for m in cc.ids():
        await asyncio.to_thread(cc.restart, m)
    await cc.leader(timeout=20)
    c = Client(cc.client_urls(), timeout=5.0)
    present = 0
    for k, v in acked.items():
        r = await c.get(k)
        present += bool(r.kvs and r.kvs[0].value == v)
    await c.close()
    return present, len(acked)


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="raftkube-figures-") as tmp:
        root = Path(tmp)
        for phase in ("kills", "minority", "catchup-log", "catchup-snapshot", "kill-all"):
            snapshot_count = 2000 if phase == "catchup-snapshot" else 100_000
            s = StoreSettings(
                members=3,
                data_dir=root / phase,
                raft=PROFILES["default"],
                request_timeout=2.0,
                snapshot_count=snapshot_count,
                snapshot_catchup_entries=500,
            )
            cc = ChaosCluster(s, root)
            try:
                await asyncio.to_thread(cc.start)
                await cc.leader(timeout=20)
                if phase == "kills":
                    tl, tw = await leader_kills(cc, args.kills)
                    print(
                        f"leader kills ({len(tl)}): new leader median {statistics.median(tl):.2f}s "
                        f"p99 {pct(tl, 99):.2f}s; first write median {statistics.median(tw):.2f}s "
                        f"p99 {pct(tw, 99):.2f}s"
                    )
                elif phase == "minority":
                    base, during, failures = await minority(cc)
                    print(
                        f"minority failure: {during:.0f} writes/s vs baseline {base:.0f} "
                        f"({during / base:.0%}); failed ops on the healthy majority: {failures}"
                    )
                elif phase.startswith("catchup"):
                    t = await catch_up(cc, 10_000)
                    snap = any(cc.log_mentions(i, "installed a snapshot from the leader") for i in cc.ids())
                    print(
                        f"restarted member 10,000 entries behind (snapshot_count {snapshot_count}) caught up "
                        f"{'via a snapshot' if snap else 'from the log'} in {t:.2f}s"
                    )
                else:
                    present, acked = await kill_all(cc, 2000)
                    print(
                        f"all members SIGKILLed (un-fsynced bytes dropped) and restarted: "
                        f"{present}/{acked} acknowledged writes present ({present / max(1, acked):.0%})"
                    )
            finally:
                await asyncio.to_thread(cc.stop)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.chaos_figures", description=__doc__)
    p.add_argument("--kills", type=int, default=20)
    asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    main()
