"""A real store cluster for tests: member processes on free loopback ports in a temp dir.

Every process is started through the launcher (its own process group) and stopped by pid
when the test ends, whatever happened.  Waits are bounded in time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from machinery.process import disk
from machinery.process.launch import free_ports
from store.api.errors import StoreError
from store.client.client import Client
from store.config import RaftSettings, StoreSettings
from store.launcher import LocalCluster


def fast_settings(data_dir: Path, members: int = 3, **changes: Any) -> StoreSettings:
    """Short ticks so that elections take a fraction of a second in tests."""
    raft = RaftSettings(tick_ms=20, election_ticks=10, heartbeat_ticks=1)
    s = StoreSettings(members=members, data_dir=data_dir, raft=raft, request_timeout=2.0)
    return dataclasses.replace(s, **changes)


class StoreCluster:
    def __init__(
        self,
        settings: StoreSettings,
        backup: bytes | None = None,
        env: dict[str, str] | None = None,
        insecure: bool = False,
    ) -> None:
        """Lay out a new cluster; with `backup`, it starts from that backup's state; `env`
        is added to every member process's environment (e.g. test-only failpoints).  It
        speaks mutual TLS unless `insecure` (for tests whose proxies read Raft frames)."""
        self.settings = settings
        self.env = env
        self.local = LocalCluster(settings.data_dir)
        infos = self.local.create(settings, ports=free_ports(3 * settings.members), insecure=insecure)
        self.tls = self.local.client_tls()
        if backup is not None:
            for m in infos:
                disk.write_private(self.local.member_dir(m.id) / "restore_from.bin", backup)

    @property
    def endpoints(self) -> list[str]:
        return self.local.client_urls()

    def endpoint(self, member_id: int) -> str:
        return next(m.client_url for m in self.local.members() if m.id == member_id)

    def start(self) -> None:
        self.local.start_all(self.env)

    def start_member(self, member_id: int) -> int:
        """(Re)start one member with the cluster's extra environment."""
        return self.local.start_member(member_id, self.env)

    def stop(self) -> None:
        self.local.stop_all(timeout=5)

    def client(self, endpoints: list[str] | None = None, timeout: float = 5.0, connect_timeout: float = 1.0) -> Client:
        """A client of this cluster (with its admin certificate)."""
        return Client(endpoints or self.endpoints, timeout=timeout, connect_timeout=connect_timeout, tls=self.tls)

    async def statuses(self) -> dict[int, dict[str, Any] | None]:
        out: dict[int, dict[str, Any] | None] = {}
        for m in self.local.members():
            c = self.client([m.client_url], timeout=0.5, connect_timeout=0.3)
            try:
                out[m.id] = (await c.status(endpoint=m.client_url)).to_json()
            except (StoreError, OSError):
                out[m.id] = None
            finally:
                await c.close()
        return out

    def wait_leader(self, timeout: float = 15.0, exclude: tuple[int, ...] = ()) -> int:
        """The id of a leader that the running members agree on (bounded wait)."""
        deadline = time.monotonic() + timeout
        last: dict[int, dict[str, Any] | None] = {}
        while time.monotonic() < deadline:
            last = asyncio.run(self.statuses())
            live = {i: s for i, s in last.items() if s is not None and i not in exclude}
            leaders = [i for i, s in live.items() if s["role"] == "leader"]
            if len(leaders) == 1 and all(s["leader"] == leaders[0] for s in live.values()):
                return leaders[0]
            time.sleep(0.05)
        raise AssertionError(f"no agreed leader within {timeout}s: {last}")

    def wait_applied(self, revision: int, members: list[int], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = asyncio.run(self.statuses())
            if all(st.get(m) is not None and st[m]["revision"] >= revision for m in members):  # type: ignore[index]
                return
            time.sleep(0.05)
        raise AssertionError(f"members {members} did not reach revision {revision} within {timeout}s")


@contextmanager
def running_cluster(
    data_dir: Path, members: int = 3, env: dict[str, str] | None = None, insecure: bool = False, **changes: Any
) -> Iterator[StoreCluster]:
    tc = StoreCluster(fast_settings(data_dir, members, **changes), env=env, insecure=insecure)
    try:
        tc.start()
        tc.wait_leader()
        yield tc
    finally:
        tc.stop()
