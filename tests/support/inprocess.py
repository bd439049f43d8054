"""Store members in this test's own process and event loop: real sockets, real files, real
TLS, but every member's parts are reachable (its node, its state, its clock), so a test can
do what no client can, such as putting a malformed entry straight into the Raft log."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from machinery.process.launch import free_ports
from store.client.client import Client
from store.launcher import LocalCluster
from store.server.clock import SYSTEM_CLOCK, Clock
from store.server.config import read_member_file
from store.server.member import Member
from tests.support.cluster import fast_settings


class InProcessCluster:
    def __init__(self, data_dir: Path, members: int = 3, clock: Clock = SYSTEM_CLOCK, **changes: Any) -> None:
        self.local = LocalCluster(data_dir)
        self.local.create(fast_settings(data_dir, members, **changes), ports=free_ports(3 * members))
        self.clock = clock
        self.members: dict[int, Member] = {}

    def client(self, timeout: float = 5.0) -> Client:
        return Client(self.local.client_urls(), timeout=timeout, tls=self.local.client_tls())

    async def start_member(self, member_id: int) -> Member:
        cfg = read_member_file(self.local.member_dir(member_id))
        m = Member(dataclasses.replace(cfg), self.clock)
        await m.start()
        self.members[member_id] = m
        return m

    async def stop_member(self, member_id: int) -> None:
        await self.members.pop(member_id).stop()

    async def leader(self, timeout: float = 10.0) -> Member:
        """The member every running member agrees leads (bounded wait)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            leaders = [m for m in self.members.values() if m.node.is_leader]
            if len(leaders) == 1 and all(m.node.lead == leaders[0].id for m in self.members.values()):
                return leaders[0]
            await asyncio.sleep(0.02)
        raise AssertionError("no agreed leader in time")

    async def applied_everywhere(self, index: int, timeout: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if all(m.state.applied_index >= index for m in self.members.values()):
                return
            await asyncio.sleep(0.01)
        got = {i: m.state.applied_index for i, m in self.members.items()}
        raise AssertionError(f"not every member applied index {index} in time: {got}")


@asynccontextmanager
async def inprocess_cluster(
    data_dir: Path, members: int = 3, clock: Clock = SYSTEM_CLOCK, **changes: Any
) -> AsyncIterator[InProcessCluster]:
    c = InProcessCluster(data_dir, members, clock, **changes)
    try:
        for mid in c.local.member_ids():
            await c.start_member(mid)
        yield c
    finally:
        for mid in list(c.members):
            await c.stop_member(mid)
