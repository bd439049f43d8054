"""One chaos scenario, start to verdict: a fresh cluster, the workload, one fault, then
recovery, the end-of-run evidence (final write, full-history watches, hashes, apply logs)
and the checks.  Shaped after etcd's robustness test run.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store.api.kv import PutRequest, prefix_end
from store.chaos.cluster import ChaosCluster
from store.chaos.faults import FAULTS, NETWORK_FAULTS, FaultContext
from store.chaos.history import OK, History, Operation, Violation, WatchRecord
from store.chaos.workload import PREFIX, Recorder, Workload, WorkloadSettings, consume
from store.config import RaftSettings, StoreSettings

PROFILES: dict[str, RaftSettings] = {
    "fast": RaftSettings(tick_ms=20, election_ticks=10, heartbeat_ticks=1),
    "default": RaftSettings(tick_ms=100, election_ticks=10, heartbeat_ticks=1),
}
"""`fast` keeps CI runs short (election timeout 200 ms); `default` is etcd's 100/1000 ms."""

CANARIES = ("ack-before-fsync", "read-without-readindex", "drop-watch-event-at-compaction", "skip-prev-kv")


@dataclass
class Scenario:
    fault: str
    seed: int = 0
    members: int = 3
    profile: str = "fast"
    warmup: float = 1.0
    after: float = 1.0
    hold: float = 0.0
    """How long the fault lasts; 0 = 4 election timeouts."""
    canary: str = ""
    snapshot_count: int = 300
    min_qps: float = 50.0
    wgl_budget: float = 20.0
    api: str = "native"
    """The front door the KV clients and the compactor use: our protocol, or the members'
    etcd gRPC API ("etcd"); the watchers stay on ours."""
    hosts: str = "local"
    """"netns": each member on a host of its own, with mutual TLS on, faulted by the kernel
    (KernelMesh); "local": all on 127.0.0.1 in plaintext, faulted by proxies (ProxyMesh)."""
    hosts_subnet: str = "10.77.0.0/24"

    @property
    def name(self) -> str:
        tail = f"+{self.canary}" if self.canary else ""
        via = "+etcd-api" if self.api == "etcd" else ""
        where = "+netns" if self.hosts == "netns" else ""
        return f"{self.fault}{tail}{via}{where}@{self.seed}"

    def rerun_command(self) -> str:
        c = f" --canary {self.canary}" if self.canary else ""
        if self.snapshot_count != Scenario.snapshot_count:
            c += f" --snapshot-count {self.snapshot_count}"
        if self.api != "native":
            c += f" --api {self.api}"
        if self.hosts != "local":
            c += f" --hosts {self.hosts}"
        return (
            f"raftkube chaos --faults {self.fault} --seed {self.seed} --members {self.members}"
            f" --profile {self.profile}{c}"
        )


@dataclass
class Result:
    scenario: Scenario
    fault_account: str = ""
    ops: int = 0
    errors: int = 0
    violations: list[Violation] = field(default_factory=list)
    qps_before: float = 0.0
    leaderless: float = 0.0
    """Longest time without an agreed leader after the fault started (seconds)."""
    first_write_after: float | None = None
    """From the fault's start to the first successful write that began after it."""
    report_dir: Path | None = None
    history: History | None = None

    @property
    def passed(self) -> bool:
        return not self.violations


class LeaderProbe:
    """Polls members every 50 ms and remembers when an agreed leader was missing."""

    def __init__(self, cc: ChaosCluster) -> None:
        self.cc = cc
        self.samples: list[tuple[float, int]] = []
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            st = await self.cc.statuses()
            live = [s for s in st.values() if s is not None]
            # A leader counts once a majority of all members follow it (a member restarting
            # does not know the leader for a heartbeat; that is not a leaderless cluster).
            votes: dict[int, int] = {}
            for s in live:
                if s["leader"]:
                    votes[s["leader"]] = votes.get(s["leader"], 0) + 1
            roles = {s["id"]: s["role"] for s in live}
            leading = [lead for lead, n in votes.items() if n * 2 > len(st) and roles.get(lead) == "leader"]
            self.samples.append((time.monotonic(), leading[0] if leading else 0))
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    def longest_gap(self, since: float) -> float:
        gap, start = 0.0, None
        for t, lead in self.samples:
            if t < since:
                continue
            if lead == 0 and start is None:
                start = t
            elif lead != 0 and start is not None:
                gap, start = max(gap, t - start), None
        if start is not None and self.samples:
            gap = max(gap, self.samples[-1][0] - start)
        return gap


def settings_for(sc: Scenario, data_dir: Path) -> StoreSettings:
    return StoreSettings(
        members=sc.members,
        data_dir=data_dir,
        raft=PROFILES[sc.profile],
        request_timeout=2.0,
        snapshot_count=sc.snapshot_count,
        snapshot_catchup_entries=max(10, sc.snapshot_count // 4),
        hosts=sc.hosts,
        hosts_subnet=sc.hosts_subnet,
    )


async def run_scenario(sc: Scenario, report_dir: Path, progress: Any = None) -> Result:
    """Run `sc` in `report_dir` (which must not exist yet) and check its history."""
    from store.chaos.check import check_history, merge_apply_logs  # noqa: PLC0415 - heavy, only at the end

    say = progress or (lambda _msg: None)
    report_dir.mkdir(parents=True)
    rng = random.Random(sc.seed)
    st = settings_for(sc, report_dir / "data")
    et = st.raft.tick_ms * st.raft.election_ticks / 1000
    hold = sc.hold or 4 * et
    cc = ChaosCluster(st, report_dir)
    if sc.canary:
        cc.env["RAFTKUBE_UNSAFE"] = sc.canary
    result = Result(sc, report_dir=report_dir)
    if sc.fault in NETWORK_FAULTS:
        if cc.own_hosts:
            from store.chaos.kernel_net import KernelMesh  # noqa: PLC0415

            cc.mesh = KernelMesh(cc.local)
        else:
            from store.chaos.network import ProxyMesh  # noqa: PLC0415

            cc.mesh = ProxyMesh(cc.local, seed=sc.seed)
    probe = LeaderProbe(cc)
    ws = WorkloadSettings(
        request_timeout=max(0.5, 2.5 * et),
        lease_ttl=max(2, int(5 * et) + 1),
        api=sc.api,
        tls=cc.tls,
        grpc_credentials=cc.grpc_credentials() if sc.api == "etcd" else None,
    )
    try:
        await asyncio.to_thread(cc.start)
        if not await cc.leader(timeout=20):
            raise RuntimeError("the cluster elected no leader within 20 s")
        wl = Workload(cc.client_urls(), ws, seed=rng.randrange(1 << 30))
        probe.start()
        t_start = time.monotonic()
        wl.start()
        say(f"{sc.name}: traffic for {sc.warmup:.1f}s")
        await asyncio.sleep(sc.warmup + rng.uniform(-0.2, 0.2))
        t_fault = time.monotonic()
        result.qps_before = wl.ok_ops_between(t_start + 0.2, t_fault) / max(0.1, t_fault - t_start - 0.2)
        ctx = FaultContext(cc, rng, et, hold)
        say(f"{sc.name}: injecting {sc.fault}")
        result.fault_account = await FAULTS[sc.fault](ctx)
        say(f"{sc.name}: {result.fault_account}")
        await asyncio.sleep(sc.after)
        await wl.finish(grace=ws.request_timeout + 0.5)
        await probe.stop()
        result.leaderless = probe.longest_gap(t_fault)
        result.first_write_after = _first_write_after(wl.rec.operations, t_fault)
        # Recovery: undo every fault, start whatever is down.
        if cc.mesh is not None:
            cc.mesh.heal()
            for m in cc.ids():
                cc.mesh.heal_clients(m)
        cc.disk_full(False)
        for m in cc.ids():
            cc.resume(m)
            await asyncio.to_thread(cc.restart, m)
        say(f"{sc.name}: recovered; final write and full-history watches")
        final_rev = await _final_write(cc, wl.rec, result)
        if final_rev and not await cc.wait_revision(final_rev, timeout=20):
            result.violations.append(
                Violation("convergence", f"not every member reached revision {final_rev} within 20 s after healing")
            )
        await _full_history_watches(cc, wl.rec, final_rev)
        hashes = await cc.hashes(final_rev) if final_rev else {}
        history = History(wl.rec.operations, wl.rec.watches, election_timeout=et, faults=ctx.intervals)
        history.final_hashes = hashes
    finally:
        await probe.stop()
        await asyncio.to_thread(cc.stop)
    history.applied = merge_apply_logs(cc.apply_logs())
    result.history = history
    result.ops = len(history.operations)
    result.errors = sum(1 for o in history.operations if o.outcome != OK)
    if result.qps_before < sc.min_qps:
        result.violations.append(
            Violation("low-load", f"{result.qps_before:.0f} ok ops/s before the fault, below the minimum {sc.min_qps}")
        )
    say(f"{sc.name}: checking {result.ops} operations and {len(history.watches)} watches")
    result.violations += check_history(history, wgl_budget_s=sc.wgl_budget)
    return result


def _first_write_after(ops: list[Operation], t: float) -> float | None:
    times = [o.ret - t for o in ops if o.is_write and o.outcome == OK and o.call >= t]
    return min(times) if times else None


async def _final_write(cc: ChaosCluster, rec: Recorder, result: Result) -> int:
    """One write must succeed once the faults are undone (the cluster recovered)."""
    client = cc.client(cc.client_urls(), timeout=2.0)
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            req = PutRequest(PREFIX + b"tombstone", b"final-%d" % len(rec.operations))
            op = Operation(0, len(rec.operations), "put", req, 0.0)
            resp = await rec.call(client, op, "put", req.to_wire(), None)
            if resp is not None:
                return int(op.revision)
            await asyncio.sleep(0.2)
    finally:
        await client.close()
    result.violations.append(Violation("final-write", "no write succeeded within 30 s after every fault was undone"))
    return 0


async def _full_history_watches(cc: ChaosCluster, rec: Recorder, final_rev: int) -> None:
    """One watch per member from revision 1 to the final revision; after a compaction
    cancel it goes on from the compact revision + 1 (as etcd's robustness test does)."""
    if not final_rev:
        return

    async def one(member: int) -> None:
        url = cc.info(member).client_url
        client = cc.client([url], timeout=5)
        start = 1
        deadline = time.monotonic() + 30
        try:
            for _ in range(100):
                if time.monotonic() > deadline:
                    break
                w = client.watch(PREFIX, prefix_end(PREFIX), start_revision=start, prev_kv=True)
                r = WatchRecord(-member, PREFIX, prefix_end(PREFIX), start, True, time.monotonic())
                r.full_history_of = member
                rec.watches.append(r)
                stop = asyncio.Event()
                await consume(w, r, stop, until_revision=final_rev, deadline=deadline, progress_every=(0.1, 0.1))
                last = r.responses[-1] if r.responses else None
                if last is not None and last.canceled and last.compact_revision:
                    start = last.compact_revision + 1
                    continue
                break
        finally:
            await client.close()

    await asyncio.gather(*(one(m) for m in cc.ids()))


__all__ = ["CANARIES", "PROFILES", "Result", "Scenario", "run_scenario", "settings_for"]
