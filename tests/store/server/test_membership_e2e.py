"""Membership changes, leader moves and backups on a live cluster of member processes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from machinery.process.launch import free_ports
from store.api import errors as E
from store.api.cluster import MemberInfo
from store.server.state import ReplicatedState
from tests.support.cluster import StoreCluster, fast_settings, running_cluster


def _add_local_member(tc: StoreCluster, name: str, learner: bool) -> MemberInfo:
    c, p, h = free_ports(3)

    async def add() -> MemberInfo:
        async with tc.client() as cl:
            return await cl.member_add(
                name, f"tcp://127.0.0.1:{p}", f"tcp://127.0.0.1:{c}", f"http://127.0.0.1:{h}", learner
            )

    info = asyncio.run(add())
    tc.local.add_member_layout(info)
    tc.local.start_member(info.id)
    return info


def test_add_learner_promote_then_remove(tmp_path: Path) -> None:
    """A learner joins empty, catches up, is promoted to voter, and a voter can be removed."""
    with running_cluster(tmp_path) as tc:

        async def fill() -> int:
            async with tc.client() as c:
                rev = 0
                for i in range(50):
                    rev = (await c.put(b"m/%d" % i, b"v")).revision
                return rev

        rev = asyncio.run(fill())
        info = _add_local_member(tc, "m4", learner=True)
        tc.wait_applied(rev, [info.id])

        async def promote_and_check() -> list[MemberInfo]:
            async with tc.client() as c:
                deadline = time.monotonic() + 10
                while True:
                    try:
                        await c.member_promote(info.id)
                        break
                    except E.LearnerNotReadyError:
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.1)
                return await c.members()

        members = asyncio.run(promote_and_check())
        assert {m.id: m.is_learner for m in members} == {1: False, 2: False, 3: False, 4: False}
        leader = tc.wait_leader()
        victim = next(m for m in (1, 2, 3) if m != leader)

        async def remove() -> list[MemberInfo]:
            async with tc.client() as c:
                await c.member_remove(victim)
                await c.put(b"m/after-remove", b"v")
                return await c.members()

        members = asyncio.run(remove())
        assert sorted(m.id for m in members) == sorted({1, 2, 3, 4} - {victim})
        tc.local.stop_member(victim)
        tc.local.forget_member(victim)


def test_move_leader(tmp_path: Path) -> None:
    """move_leader hands leadership to the named member."""
    with running_cluster(tmp_path) as tc:
        leader = tc.wait_leader()
        target = next(m for m in (1, 2, 3) if m != leader)

        async def move() -> None:
            async with tc.client() as c:
                await c.move_leader(target)

        asyncio.run(move())
        assert tc.wait_leader() == target


def test_single_member_refuses_to_remove_its_last_voter(tmp_path: Path) -> None:
    """Removing the only voter is refused with LastVoterError and changes nothing."""
    with running_cluster(tmp_path, members=1) as tc:

        async def go() -> None:
            async with tc.client() as c:
                with pytest.raises(E.LastVoterError):
                    await c.member_remove(1)
                await c.put(b"still", b"here")

        asyncio.run(go())


def test_backup_and_restore_into_a_new_cluster(tmp_path: Path) -> None:
    """A backup restores into a new cluster with the same keys, values and revisions."""
    with running_cluster(tmp_path / "old") as tc:

        async def fill() -> tuple[bytes, list[tuple[bytes, bytes, int]]]:
            async with tc.client() as c:
                for i in range(30):
                    await c.put(b"b/%02d" % i, b"value-%d" % i)
                await c.delete(b"b/00")
                _, data = await c.snapshot()
                r = await c.get(b"b/", prefix=True)
                return data, [(kv.key, kv.value, kv.mod_revision) for kv in r.kvs]

        backup, expected = asyncio.run(fill())
    assert ReplicatedState.check_backup(backup) >= 31
    tc2 = StoreCluster(fast_settings(tmp_path / "new"), backup=backup)
    try:
        tc2.start()
        tc2.wait_leader()

        async def read() -> list[tuple[bytes, bytes, int]]:
            async with tc2.client() as c:
                r = await c.get(b"b/", prefix=True)
                await c.put(b"b/new", b"x")
                return [(kv.key, kv.value, kv.mod_revision) for kv in r.kvs]

        assert asyncio.run(read()) == expected
    finally:
        tc2.stop()
    with pytest.raises(E.InvalidArgumentError, match="checksum"):
        ReplicatedState.check_backup(backup[:-5] + b"xxxxx")
    with pytest.raises(E.InvalidArgumentError, match="magic"):
        ReplicatedState.check_backup(b"not a backup")
