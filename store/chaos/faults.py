"""Named faults: each injects one kind of trouble into a running cluster, holds it for a
while, and undoes what can be undone (a killed member is restarted, a partition healed).

A fault is an async function of a `FaultContext` that returns a one-line account of what it
did.  It runs while the workload keeps going; blocking levers run in a thread so that the
clients' event loop never stalls.  `FAULTS` maps the names the CLI and tests use.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from store import failpoints
from store.chaos.cluster import ChaosCluster

FOLLOWER_CRASH_POINTS = ("snapshot-before-install", "snapshot-after-install")
"""Crash failpoints reached on a follower that the leader must send a snapshot to."""
CRASH_POINTS = tuple(n for n in failpoints.NAMES if n not in (*FOLLOWER_CRASH_POINTS, "conf-change-before-apply"))
"""Crash failpoints reached on the leader (watch-before-send: on any member) by the workload itself;
conf-change-before-apply is exercised as a sleep by `slow-conf-change`."""


@dataclass
class FaultContext:
    cc: ChaosCluster
    rng: random.Random
    election_timeout: float
    """Seconds (election ticks * tick)."""
    hold: float
    """How long a fault lasts when it has a duration (seconds)."""
    intervals: list[tuple[float, float, str]] = field(default_factory=list)

    async def leader(self) -> int:
        return await self.cc.leader(timeout=max(5.0, 10 * self.election_timeout))

    async def follower(self) -> int:
        lead = await self.leader()
        return self.rng.choice([i for i in self.cc.ids() if i != lead])

    async def hold_for(self, seconds: float, what: str) -> None:
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        self.intervals.append((t0, time.monotonic(), what))


Fault = Callable[[FaultContext], Awaitable[str]]


# ---------------------------------------------------------------- processes
async def _kill_restart(ctx: FaultContext, members: list[int], what: str) -> str:
    t0 = time.monotonic()
    for m in members:
        await asyncio.to_thread(ctx.cc.kill, m, True)
    await asyncio.sleep(ctx.hold)
    for m in members:
        await asyncio.to_thread(ctx.cc.restart, m)
    ctx.intervals.append((t0, time.monotonic(), what))
    return f"{what}: SIGKILL member(s) {members}, un-fsynced data dropped, restarted after {ctx.hold:.1f}s"


async def kill_random(ctx: FaultContext) -> str:
    return await _kill_restart(ctx, [ctx.rng.choice(ctx.cc.ids())], "kill-random")


async def kill_leader(ctx: FaultContext) -> str:
    return await _kill_restart(ctx, [await ctx.leader()], "kill-leader")


async def kill_follower(ctx: FaultContext) -> str:
    return await _kill_restart(ctx, [await ctx.follower()], "kill-follower")


async def kill_all(ctx: FaultContext) -> str:
    return await _kill_restart(ctx, list(ctx.cc.ids()), "kill-all")


async def _corrupt_wal(ctx: FaultContext, how: str) -> str:
    m = await ctx.follower()
    t0 = time.monotonic()
    await asyncio.to_thread(ctx.cc.kill, m, True)
    what = await asyncio.to_thread(ctx.cc.corrupt_wal_tail, m, how)
    await asyncio.sleep(ctx.hold / 2)
    await asyncio.to_thread(ctx.cc.restart, m)
    deadline = time.monotonic() + 10
    while not (seen := ctx.cc.log_mentions(m, "truncating a torn tail")) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    ctx.intervals.append((t0, time.monotonic(), f"wal-{how}"))
    verdict = "detected and truncated on restart" if seen else "NOT detected on restart"
    return f"wal-{how} on member {m}: {what}; {verdict}"


async def wal_torn(ctx: FaultContext) -> str:
    return await _corrupt_wal(ctx, "torn")


async def wal_bitflip(ctx: FaultContext) -> str:
    return await _corrupt_wal(ctx, "bitflip")


async def _pause(ctx: FaultContext, member: int, factor: float, what: str) -> str:
    seconds = factor * ctx.election_timeout
    t0 = time.monotonic()
    ctx.cc.pause(member)
    try:
        await asyncio.sleep(seconds)
    finally:
        ctx.cc.resume(member)
    ctx.intervals.append((t0, time.monotonic(), what))
    return f"{what}: SIGSTOP member {member} for {seconds:.2f}s ({factor}x election timeout), then SIGCONT"


async def pause_leader_short(ctx: FaultContext) -> str:
    return await _pause(ctx, await ctx.leader(), 0.5, "pause-leader-short")


async def pause_leader_long(ctx: FaultContext) -> str:
    return await _pause(ctx, await ctx.leader(), 3.0, "pause-leader-long")


async def pause_follower_short(ctx: FaultContext) -> str:
    return await _pause(ctx, await ctx.follower(), 0.5, "pause-follower-short")


async def pause_follower_long(ctx: FaultContext) -> str:
    return await _pause(ctx, await ctx.follower(), 3.0, "pause-follower-long")


# ---------------------------------------------------------------- failpoints
async def _crash_at(ctx: FaultContext, members: list[int], point: str, armed: bool = False) -> str:
    """Arm `point` to crash once on `members` (unless the caller `armed` it already: the
    member may be dying there right now, and an HTTP call to it would fail); wait for one
    of them to die there (the others are disarmed then); restart it."""
    t0 = time.monotonic()
    if not armed:
        for m in members:
            await asyncio.to_thread(ctx.cc.failpoint, m, point, "1*crash")
    deadline = time.monotonic() + max(3.0, 4 * ctx.hold)
    while all(ctx.cc.alive(m) for m in members) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    died = [m for m in members if not ctx.cc.alive(m)]
    for m in members:
        if m not in died:
            try:
                await asyncio.to_thread(ctx.cc.failpoint, m, point, None)
            except OSError:  # it was crashing there as we disarmed
                await asyncio.sleep(0.2)
                if ctx.cc.alive(m):
                    raise
                died.append(m)
    for m in died:
        await asyncio.to_thread(ctx.cc.kill, m, True)  # drop its un-fsynced bytes too
    if died:
        await asyncio.sleep(ctx.hold / 2)
    for m in died:
        await asyncio.to_thread(ctx.cc.restart, m)
    ctx.intervals.append((t0, time.monotonic(), f"crash at {point}"))
    if died:
        return f"failpoint {point}: member(s) {died} crashed there and were restarted"
    return f"failpoint {point} on member(s) {members}: was NOT reached within the time allowed"


def crash_point(point: str) -> Fault:
    async def fault(ctx: FaultContext) -> str:
        # Watches are served by any member: arm it everywhere, the first to send crashes.
        members = list(ctx.cc.ids()) if point == "watch-before-send" else [await ctx.leader()]
        return await _crash_at(ctx, members, point)

    fault.__name__ = f"crash_{point.replace('-', '_')}"
    return fault


def follower_snapshot_crash(point: str) -> Fault:
    """Cut a follower off until the leader has compacted its log past it, then heal: the
    follower must install a snapshot, and crashes while doing so."""

    async def fault(ctx: FaultContext) -> str:
        m = await ctx.follower()
        await asyncio.to_thread(ctx.cc.failpoint, m, point, "1*crash")
        detail = await _isolate_until_snapshot(ctx, m)
        return (await _crash_at(ctx, [m], point, armed=True)) + f" ({detail})"

    fault.__name__ = f"crash_{point.replace('-', '_')}"
    return fault


async def slow_fsync_leader(ctx: FaultContext) -> str:
    """Every WAL fsync of the leader takes longer than an election timeout, for a while."""
    m = await ctx.leader()
    ms = int(1.5 * ctx.election_timeout * 1000)
    t0 = time.monotonic()
    await asyncio.to_thread(ctx.cc.failpoint, m, "wal-after-append", f"sleep({ms})")
    await asyncio.sleep(ctx.hold)
    await asyncio.to_thread(ctx.cc.failpoint, m, "wal-after-append", None)
    ctx.intervals.append((t0, time.monotonic() + ms / 1000, "slow-fsync"))
    return f"slow-fsync: leader {m}'s WAL fsyncs sleep {ms} ms each for {ctx.hold:.1f}s"


async def slow_watch_send(ctx: FaultContext) -> str:
    ms = int(ctx.hold * 500)
    t0 = time.monotonic()
    for m in ctx.cc.ids():
        await asyncio.to_thread(ctx.cc.failpoint, m, "watch-before-send", f"3*sleep({ms})")
    await asyncio.sleep(ctx.hold)
    for m in ctx.cc.ids():
        await asyncio.to_thread(ctx.cc.failpoint, m, "watch-before-send", None)
    ctx.intervals.append((t0, time.monotonic(), "slow-watch-send"))
    return f"slow-watch-send: every member sleeps {ms} ms before sending a watch response (3 times)"


# ---------------------------------------------------------------- disk
async def disk_full(ctx: FaultContext) -> str:
    t0 = time.monotonic()
    ctx.cc.disk_full(True)
    try:
        await asyncio.sleep(ctx.hold)
    finally:
        ctx.cc.disk_full(False)
    ctx.intervals.append((t0, time.monotonic(), "disk-full"))
    dead = [m for m in ctx.cc.ids() if not ctx.cc.alive(m)]
    for m in dead:
        await asyncio.to_thread(ctx.cc.restart, m)
    tail = f"; members {dead} had stopped and were restarted" if dead else ""
    return f"disk-full: every write failed with ENOSPC for {ctx.hold:.1f}s{tail}"


# ---------------------------------------------------------------- network
def _mesh(ctx: FaultContext) -> object:
    if ctx.cc.mesh is None:
        raise RuntimeError("network faults need the proxy mesh")
    return ctx.cc.mesh


async def _network(ctx: FaultContext, what: str, apply: Callable[[], None]) -> str:
    mesh = _mesh(ctx)
    t0 = time.monotonic()
    apply()
    try:
        await asyncio.sleep(ctx.hold)
    finally:
        mesh.heal()  # type: ignore[attr-defined]
    ctx.intervals.append((t0, time.monotonic(), what))
    return f"{what} for {ctx.hold:.1f}s, then healed"


async def isolate_leader(ctx: FaultContext) -> str:
    m = await ctx.leader()
    return await _network(ctx, f"isolate-leader (member {m})", lambda: ctx.cc.mesh.isolate(m))


async def isolate_follower(ctx: FaultContext) -> str:
    m = await ctx.follower()
    return await _network(ctx, f"isolate-follower (member {m})", lambda: ctx.cc.mesh.isolate(m))


async def partition_majority(ctx: FaultContext) -> str:
    """Split into a majority and a minority that holds the leader."""
    ids = ctx.cc.ids()
    lead = await ctx.leader()
    others = [i for i in ids if i != lead]
    ctx.rng.shuffle(others)
    minority = [lead, *others[: (len(ids) - 1) // 2 - 1]] if len(ids) > 3 else [lead]
    majority = [i for i in ids if i not in minority]
    groups = [minority, majority]
    return await _network(ctx, f"partition {minority} | {majority}", lambda: ctx.cc.mesh.partition(groups))


async def bridge(ctx: FaultContext) -> str:
    ids = ctx.cc.ids()
    lead = await ctx.leader()
    rest = [i for i in ids if i != lead]
    a, b = rest[0], rest[1]
    return await _network(ctx, f"bridge {a} <-> {lead} <-> {b}", lambda: ctx.cc.mesh.bridge(a, lead, b))


async def one_way_leader(ctx: FaultContext) -> str:
    """The leader's messages to the others are lost; theirs still reach it."""
    lead = await ctx.leader()

    def apply() -> None:
        for m in ctx.cc.ids():
            if m != lead:
                ctx.cc.mesh.one_way(lead, m)

    return await _network(ctx, f"one-way loss from leader {lead}", apply)


async def cut_connections(ctx: FaultContext) -> str:
    lead = await ctx.leader()
    t0 = time.monotonic()
    for _ in range(3):
        ctx.cc.mesh.cut_all(lead)
        await asyncio.sleep(ctx.hold / 3)
    ctx.intervals.append((t0, time.monotonic(), "cut-connections"))
    return f"cut-connections: every live peer connection of leader {lead} closed 3 times over {ctx.hold:.1f}s"


async def delay_network(ctx: FaultContext) -> str:
    m = await ctx.leader()
    return await _network(ctx, f"delay 75±50 ms on leader {m}'s links", lambda: ctx.cc.mesh.delay(m, 0.075, 0.05))


async def drop_frames(ctx: FaultContext) -> str:
    m = await ctx.leader()
    return await _network(ctx, f"drop 50% of leader {m}'s frames", lambda: ctx.cc.mesh.drop(m, 0.5))


async def clients_cut(ctx: FaultContext) -> str:
    m = await ctx.leader()
    t0 = time.monotonic()
    ctx.cc.mesh.cut_clients(m)
    try:
        await asyncio.sleep(ctx.hold)
    finally:
        ctx.cc.mesh.heal_clients(m)
    ctx.intervals.append((t0, time.monotonic(), "clients-cut"))
    return f"clients cut from leader {m} for {ctx.hold:.1f}s (peers still connected)"


async def _isolate_until_snapshot(ctx: FaultContext, member: int, timeout: float = 20.0) -> str:
    """Isolate `member` until the leader's log no longer holds what the member needs."""
    st0 = await ctx.cc.statuses()
    behind_at = (st0.get(member) or {}).get("applied_index", 0)
    ctx.cc.mesh.isolate(member)
    t0 = time.monotonic()
    need = ctx.cc.settings.snapshot_count + ctx.cc.settings.snapshot_catchup_entries
    while time.monotonic() - t0 < timeout:
        st = await ctx.cc.statuses()
        lead = [s for s in st.values() if s is not None and s["role"] == "leader"]
        if lead and lead[0]["applied_index"] > behind_at + need:
            break
        await asyncio.sleep(0.1)
    ctx.cc.mesh.heal()
    ctx.intervals.append((t0, time.monotonic(), f"isolate {member} until snapshot"))
    return f"member {member} isolated {time.monotonic() - t0:.1f}s, until the leader was {need}+ entries ahead"


async def blackhole_until_snapshot(ctx: FaultContext) -> str:
    m = await ctx.follower()
    return "blackhole-until-snapshot: " + await _isolate_until_snapshot(ctx, m)


# ---------------------------------------------------------------- membership
async def member_replace(ctx: FaultContext) -> str:
    m = await ctx.follower()
    t0 = time.monotonic()
    new_id = await ctx.cc.replace(m, "")
    ctx.intervals.append((t0, time.monotonic(), "member-replace"))
    return f"member-replace: member {m} removed, wiped, and replaced by member {new_id} (learner, then promoted)"


async def slow_conf_change(ctx: FaultContext) -> str:
    ms = int(ctx.election_timeout * 1000)
    for m in ctx.cc.ids():
        await asyncio.to_thread(ctx.cc.failpoint, m, "conf-change-before-apply", f"2*sleep({ms})")
    return "slow-conf-change: " + await member_replace(ctx)


async def _nothing(ctx: FaultContext) -> str:
    await asyncio.sleep(ctx.hold)
    return "no fault (baseline)"


FAULTS: dict[str, Fault] = {
    "none": _nothing,
    "kill-random": kill_random,
    "kill-leader": kill_leader,
    "kill-follower": kill_follower,
    "kill-all": kill_all,
    "wal-torn": wal_torn,
    "wal-bitflip": wal_bitflip,
    "pause-leader-short": pause_leader_short,
    "pause-leader-long": pause_leader_long,
    "pause-follower-short": pause_follower_short,
    "pause-follower-long": pause_follower_long,
    "slow-fsync": slow_fsync_leader,
    "slow-watch-send": slow_watch_send,
    "disk-full": disk_full,
    "isolate-leader": isolate_leader,
    "isolate-follower": isolate_follower,
    "partition-majority": partition_majority,
    "bridge": bridge,
    "one-way-leader": one_way_leader,
    "cut-connections": cut_connections,
    "delay": delay_network,
    "drop": drop_frames,
    "clients-cut": clients_cut,
    "blackhole-until-snapshot": blackhole_until_snapshot,
    "member-replace": member_replace,
    "slow-conf-change": slow_conf_change,
    **{f"crash:{p}": crash_point(p) for p in CRASH_POINTS},
    **{f"crash:{p}": follower_snapshot_crash(p) for p in FOLLOWER_CRASH_POINTS},
}

NETWORK_FAULTS = frozenset(
    {
        "isolate-leader",
        "isolate-follower",
        "partition-majority",
        "bridge",
        "one-way-leader",
        "cut-connections",
        "delay",
        "drop",
        "clients-cut",
        "blackhole-until-snapshot",
        *(f"crash:{p}" for p in FOLLOWER_CRASH_POINTS),
    }
)

GROUPS: dict[str, list[str]] = {
    "kill": ["kill-random", "kill-leader", "kill-follower", "kill-all"],
    "disk": ["wal-torn", "wal-bitflip", "disk-full", "slow-fsync"],
    "pause": ["pause-leader-short", "pause-leader-long", "pause-follower-short", "pause-follower-long"],
    "partition": sorted(NETWORK_FAULTS - {f"crash:{p}" for p in FOLLOWER_CRASH_POINTS}),
    "failpoint": [f"crash:{p}" for p in (*CRASH_POINTS, *FOLLOWER_CRASH_POINTS)] + ["slow-watch-send"],
    "membership": ["member-replace", "slow-conf-change"],
}
"""What `--faults kill,pause,...` expands to (a name may also be given directly)."""


def expand(names: list[str]) -> list[str]:
    """Fault group names and fault names to fault names; raises ValueError naming an unknown one."""
    out: list[str] = []
    for n in names:
        if n in GROUPS:
            out.extend(GROUPS[n])
        elif n in FAULTS:
            out.append(n)
        else:
            known = ", ".join([*GROUPS, *FAULTS])
            raise ValueError(f"unknown fault {n!r}; known: {known}")
    return list(dict.fromkeys(out))
