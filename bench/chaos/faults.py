"""The faults of a cluster chaos run, drawn from a seed: SIGKILL or SIGSTOP (for a few seconds)
of store members (the leader or any), apiservers, the balancer, and the controller-manager's
and scheduler's leaders; and a stalled disk of a store member (every WAL fsync held up by
STALL_MS for a few seconds, through the store's runtime failpoints).  A killed part comes back
through `up`'s supervisor, as it would in a user's cluster; a stopped one is continued by the run.

With every part of the control plane on a host of its own (`--hosts netns`, root), network
faults come from the kernel (store/chaos/kernel_net.py, TLS on): a member isolated from the
other members, a member its clients (the apiservers) cannot reach, a member whose links lose
30 % of their packets, a slow member (its links 200 +- 100 ms late, through a delay proxy in
its namespace: the kernel cannot hold packets here); the apiservers cut from the store or unreachable for their clients
(bench/chaos/apiserver_net.py); and any part's cable pulled (its host's link down: a store
member, an apiserver, the controller-manager's or scheduler's leader, the kubelets), so that
what a partitioned leader does after its lease ran out is seen; each for 2-6 s, then healed.

Each fault is recorded with its start and end, for the report's timeline and for the reader
of a failure: which fault was under way when a check broke.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.chaos.cluster import HOLLOW, ChaosCluster
from components.cli.launcher import LocalComponent

PAUSE_S = (2.0, 6.0)
"""How long a SIGSTOPped part (or a stalled disk) stays so (drawn in this range)."""
STALL_MS = 800
STALL_POINT = "wal-after-fsync"
LOSS = 0.3
SLOW_S = (0.2, 0.1)
"""A slow member's messages to its peers arrive this late (mean, jitter): a round trip of up
to 0.6 s, under the members' 1 s election timeout, so it slows commits without an election."""
NET_HOWS = ("isolate", "unreachable", "lossy", "slow", "unplug")


@dataclass
class FaultRecord:
    name: str
    target: str
    started: float
    ended: float = 0.0
    note: str = ""


Target = Callable[[ChaosCluster, random.Random], tuple[str, int | None]]
"""(what, pid) of the part a fault hits; pid None: nothing to hit now."""


def _store_leader(c: ChaosCluster, rng: random.Random) -> tuple[str, int | None]:
    leader = c.store_leader()
    return (f"store-{leader}", c.store().pid(leader)) if leader is not None else ("store leader", None)


def _store_member(c: ChaosCluster, rng: random.Random) -> tuple[str, int | None]:
    m = rng.choice(c.store().member_ids())
    return f"store-{m}", c.store().pid(m)


def _apiserver(c: ChaosCluster, rng: random.Random) -> tuple[str, int | None]:
    a = rng.choice(c.apiserver_parts())
    return a.name, a.pid()


def _component_leader(name: str) -> Target:
    def pick(c: ChaosCluster, rng: random.Random) -> tuple[str, int | None]:
        leader = c.component_leader(name)
        return (leader.name, leader.pid()) if leader is not None else (f"{name} leader", None)

    return pick


def _kubelets(c: ChaosCluster, rng: random.Random) -> tuple[str, int | None]:
    part = LocalComponent(c.data_dir, HOLLOW)
    return part.name, part.pid()


def _balancer(c: ChaosCluster, rng: random.Random) -> tuple[str, int | None]:
    from components.cli.apiserver_set import ApiserverSet

    b = ApiserverSet(c.data_dir).balancer()
    return b.name, b.pid()


TARGETS: dict[str, Target] = {
    "store-leader": _store_leader,
    "store-member": _store_member,
    "apiserver": _apiserver,
    "controller-manager-leader": _component_leader("controller-manager"),
    "scheduler-leader": _component_leader("scheduler"),
    "balancer": _balancer,
    "kubelets": _kubelets,
}
STORE_TARGETS = ("store-leader", "store-member")
UNPLUG_TARGETS = ("store-member", "apiserver", "controller-manager-leader", "scheduler-leader", "kubelets")
"""The parts whose cable a fault pulls (each on a host of its own; the balancer is on this machine)."""
FAULTS = (
    tuple(f"{how}-{what}" for what in TARGETS for how in ("kill", "pause"))
    + tuple(f"stall-{what}" for what in STORE_TARGETS)
    + tuple(f"{how}-{what}" for how in ("isolate", "unreachable", "lossy", "slow") for what in STORE_TARGETS)
    + ("isolate-apiserver", "unreachable-apiserver")
    + tuple(f"unplug-{what}" for what in UNPLUG_TARGETS)
)
"""kill-store-leader, pause-store-leader, ... pause-balancer, stall-store-leader, stall-store-member."""
GROUPS = {
    "kill": tuple(f for f in FAULTS if f.startswith("kill-")),
    "pause": tuple(f for f in FAULTS if f.startswith("pause-")),
    "disk": tuple(f for f in FAULTS if f.startswith("stall-")),
    "net": tuple(f for f in FAULTS if f.split("-")[0] in NET_HOWS),
    "unplug": tuple(f for f in FAULTS if f.startswith("unplug-")),
    "store": tuple(f for f in FAULTS if "store" in f and f.split("-")[0] not in NET_HOWS),
    "control-plane": tuple(f for f in FAULTS if "store" not in f and f.split("-")[0] not in NET_HOWS),
}


def expand(spec: str) -> list[str]:
    """`kill,pause-apiserver` -> the fault names; ValueError names an unknown one."""
    out: list[str] = []
    for word in (w.strip() for w in spec.split(",") if w.strip()):
        if word in GROUPS:
            out += GROUPS[word]
        elif word in FAULTS:
            out.append(word)
        else:
            raise ValueError(
                f"--faults: unknown fault {word!r} (groups: {', '.join(GROUPS)}; faults: {', '.join(FAULTS)})"
            )
    if not out:
        raise ValueError("--faults: none chosen")
    return list(dict.fromkeys(out))


async def inject(cluster: ChaosCluster, fault: str, rng: random.Random, t0: float) -> FaultRecord:
    """Inject one fault and (for a pause) end it; the record of what was done."""
    how, _, what = fault.partition("-")
    name, pid = await asyncio.to_thread(TARGETS[what], cluster, rng)
    record = FaultRecord(fault, name, time.monotonic() - t0)
    if pid is None:
        record.ended, record.note = record.started, "no target (down, or no leader now)"
        return record
    cluster.seen_pids.add(pid)
    if how == "unplug":
        return await _unplug(cluster, name, rng, record, t0)
    if how in NET_HOWS and what == "apiserver":
        return await _apiserver_network_fault(cluster, how, name, rng, record, t0)
    if how in NET_HOWS:
        return await _network_fault(cluster, how, int(name.removeprefix("store-")), rng, record, t0)
    if how == "stall":
        member = int(name.removeprefix("store-"))
        before = await asyncio.to_thread(cluster.failpoint_hits, member, STALL_POINT)
        await asyncio.to_thread(cluster.failpoint, member, STALL_POINT, f"sleep({STALL_MS})")
        try:
            await asyncio.sleep(rng.uniform(*PAUSE_S))
        finally:
            try:
                await asyncio.to_thread(cluster.failpoint, member, STALL_POINT, None)
                hits = await asyncio.to_thread(cluster.failpoint_hits, member, STALL_POINT)
                record.note = f"{hits - before} WAL fsyncs held {STALL_MS} ms each"
            except OSError as e:  # it died meanwhile (another fault): restarted with none armed
                record.note = f"disarming: {e}"
        record.ended = time.monotonic() - t0
        return record
    try:
        if how == "kill":
            os.kill(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGSTOP)
            try:
                await asyncio.sleep(rng.uniform(*PAUSE_S))
            finally:
                os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        record.note = "it had exited already"
    record.ended = time.monotonic() - t0
    return record


async def fault_loop(
    cluster: ChaosCluster,
    faults: list[str],
    rng: random.Random,
    t0: float,
    until: float,
    gap: tuple[float, float],
    mixed: bool = False,
) -> list[FaultRecord]:
    """Faults one after another (a gap drawn from `gap` between them) until `until` (monotonic);
    `mixed`: half the time two different faults at once (a pause of one part while another is
    killed, say)."""
    records: list[FaultRecord] = []
    while time.monotonic() + gap[0] < until:
        await asyncio.sleep(rng.uniform(*gap))
        if time.monotonic() >= until:
            break
        count = 2 if mixed and len(faults) > 1 and rng.random() < 0.5 else 1
        chosen = rng.sample(faults, count)
        records += await asyncio.gather(*(inject(cluster, f, random.Random(rng.random()), t0) for f in chosen))
        cluster.note_pids()
    return records


async def _network_fault(
    cluster: ChaosCluster, how: str, member: int, rng: random.Random, record: FaultRecord, t0: float
) -> FaultRecord:
    mesh = cluster.mesh
    if mesh is None:
        raise ValueError(f"{record.name} needs the store members on hosts of their own (--hosts netns)")
    links = mesh.links_of(member)
    async with cluster.mesh_lock:
        if not _hold_links(cluster, STORE_LINKS, record):
            return record
        if how == "isolate":
            await asyncio.to_thread(mesh.isolate, member)
        elif how == "unreachable":
            await asyncio.to_thread(mesh.cut_clients, member)
        elif how == "slow":
            await asyncio.to_thread(mesh.delay, member, *SLOW_S)
        else:
            await asyncio.to_thread(mesh.drop, member, LOSS)
    try:
        await asyncio.sleep(rng.uniform(*PAUSE_S))
    finally:
        async with cluster.mesh_lock:
            try:
                if how == "unreachable":
                    await asyncio.to_thread(mesh.heal_clients, member)
                else:
                    await asyncio.to_thread(mesh.heal_links, links)
            finally:
                cluster.net_faulted.discard(STORE_LINKS)
    record.ended = time.monotonic() - t0
    return record


STORE_LINKS = "store"


def _hold_links(cluster: ChaosCluster, links: str, record: FaultRecord) -> bool:
    """Take `links` for this fault (True), or record it as one with no target when another
    network fault holds them (False): two at once would share a heal, the first one's ending
    both while the record of the second still ran."""
    if links in cluster.net_faulted:
        record.ended, record.note = record.started, f"no target ({links}'s links are under another network fault)"
        return False
    cluster.net_faulted.add(links)
    return True


async def _apiserver_network_fault(
    cluster: ChaosCluster, how: str, name: str, rng: random.Random, record: FaultRecord, t0: float
) -> FaultRecord:
    net = cluster.apiserver_net
    if net is None:
        raise ValueError(f"{record.name} needs the apiservers on hosts of their own (--hosts netns)")
    async with cluster.mesh_lock:
        if not _hold_links(cluster, name, record):
            return record
        await asyncio.to_thread(net.cut_from_store if how == "isolate" else net.cut_from_clients, name)
    try:
        await asyncio.sleep(rng.uniform(*PAUSE_S))
    finally:
        async with cluster.mesh_lock:
            try:
                await asyncio.to_thread(net.heal, name)
            finally:
                cluster.net_faulted.discard(name)
    record.ended = time.monotonic() - t0
    return record


async def _unplug(cluster: ChaosCluster, name: str, rng: random.Random, record: FaultRecord, t0: float) -> FaultRecord:
    """The part's host's cable pulled for a while (its veth's outer end down), then plugged back.
    Two faults on one host at once (mixed) plug it back only when the last one ends."""
    host = cluster.host_of(name)
    if host is None:
        raise ValueError(f"{record.name} needs {name} on a host of its own (--hosts netns)")
    await asyncio.to_thread(cluster.set_cable, host, False)
    try:
        await asyncio.sleep(rng.uniform(*PAUSE_S))
    finally:
        await asyncio.to_thread(cluster.set_cable, host, True)
    record.note = f"host {host}"
    record.ended = time.monotonic() - t0
    return record
