"""The cluster under test: local member processes with the test hooks a chaos run needs.

Every member runs with the apply log (evidence for the checker), the disk layer's
fsynced-length ledger (so a kill can lose what was not fsynced), a shared disk-full flag
file, and runtime failpoints over HTTP.  The levers here are the raw faults; `faults.py`
combines them into named scenarios.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from machinery.process import disk, pki
from machinery.process.launch import free_ports, port_free
from store.api.cluster import MemberInfo
from store.api.errors import StoreError
from store.api.protocol import split_url
from store.client.client import Client
from store.client.layout import CLIENT_NAME
from store.config import StoreSettings
from store.launcher import LocalCluster
from store.server.apply_log import FILE as APPLY_LOG_FILE
from store.server.apply_log import read_apply_log
from store.wal.segment import list_segments

TEST_ENV = {
    "RAFTKUBE_APPLY_LOG": "1",
    "RAFTKUBE_DISK_TRACK": disk.PER_MEMBER,
    "RAFTKUBE_FAILPOINTS_HTTP": "1",
}


@contextlib.contextmanager
def member_environment(extra: dict[str, str]) -> Iterator[None]:
    """Members inherit the launcher's environment: set the test hooks for the run only."""
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class ChaosCluster:
    def __init__(self, settings: StoreSettings, workdir: Path) -> None:
        self.settings = settings
        self.workdir = workdir
        self.local = LocalCluster(settings.data_dir)
        self.own_hosts = settings.hosts == "netns"
        """Each member on a host of its own: faults come from the kernel (KernelMesh) and the
        members speak mutual TLS.  Otherwise plaintext: the peer proxies of the fault mesh
        (ProxyMesh) are frame-aware (they drop and delay whole Raft frames), which they could
        not be inside TLS."""
        ports = None if self.own_hosts else free_ports(3 * settings.members)
        self.infos = self.local.create(settings, ports=ports, insecure=not self.own_hosts)
        self.tls = self.local.client_tls()
        self.disk_full_flag = workdir / "disk-full"
        self.env = {**TEST_ENV, disk.FAULT_FILE_ENV: str(self.disk_full_flag)}
        self.mesh: Any = None
        """The network proxies between members (store.chaos.network.ProxyMesh), if any."""

    # ------------------------------------------------------------------ membership of the run
    def ids(self) -> list[int]:
        return self.local.member_ids()

    def info(self, member_id: int) -> MemberInfo:
        return next(m for m in self.local.members() if m.id == member_id)

    def client_url(self, member_id: int) -> str:
        """Where clients reach this member (through the mesh's client proxy when there is one)."""
        if self.mesh is not None and member_id in self.mesh.clients:
            return str(self.mesh.client_url(member_id))
        return self.info(member_id).client_url

    def client_urls(self) -> list[str]:
        return [self.client_url(i) for i in self.ids()]

    def client(self, endpoints: list[str], timeout: float, connect_timeout: float | None = None) -> Client:
        """A client of the run's cluster (with its admin certificate when it speaks TLS)."""
        if connect_timeout is None:
            return Client(endpoints, timeout=timeout, tls=self.tls)
        return Client(endpoints, timeout=timeout, connect_timeout=connect_timeout, tls=self.tls)

    def grpc_credentials(self) -> Any:
        """grpc's channel credentials for the etcd API (None in plaintext)."""
        if self.tls is None:
            return None
        import grpc  # noqa: PLC0415 - grpcio only for the etcd API

        files = pki.load_files(self.local.pki_dir, CLIENT_NAME)
        return grpc.ssl_channel_credentials(files.ca.read_bytes(), files.key.read_bytes(), files.cert.read_bytes())

    # ------------------------------------------------------------------ processes
    def start(self) -> None:
        with member_environment(self.env):
            for mid in self.ids():
                if self.local.pid(mid) is None:
                    self._start(mid)

    def _start(self, member_id: int) -> None:
        cfg_urls = [self.info(member_id).client_url, self.info(member_id).peer_url, self.info(member_id).http_url]
        deadline = time.monotonic() + 5

        # A port of a member killed a moment ago may still be held by its dying process (on a
        # host of its own, only the member itself can tell: its host's ports are not ours).
        def busy() -> bool:
            return not self.own_hosts and not all(port_free(*split_url(u)) for u in cfg_urls)

        while time.monotonic() < deadline and busy():
            time.sleep(0.05)
        with member_environment(self.env):
            self.local.start_member(member_id)

    def restart(self, member_id: int) -> None:
        if self.local.pid(member_id) is None:
            self._start(member_id)

    def kill(self, member_id: int, lose_unsynced: bool = True) -> None:
        """SIGKILL; with `lose_unsynced`, also drop every byte it had not fsynced (a power cut)."""
        if self.local.pid(member_id) is None:
            return
        self.local.kill_member(member_id)
        if lose_unsynced:
            ledger = disk.ledger_for(self.local.member_dir(member_id))
            if ledger.exists():
                disk.simulate_crash(ledger)

    def pause(self, member_id: int) -> None:
        self.local.signal_member(member_id, signal.SIGSTOP)

    def resume(self, member_id: int) -> None:
        with contextlib.suppress(Exception):
            self.local.signal_member(member_id, signal.SIGCONT)

    def alive(self, member_id: int) -> bool:
        return self.local.pid(member_id) is not None

    def stop(self) -> None:
        for mid in self.ids():
            self.resume(mid)
        self.local.stop_all(timeout=5)
        if self.mesh is not None:
            self.mesh.close()
            self.mesh = None

    # ------------------------------------------------------------------ disk
    def corrupt_wal_tail(self, member_id: int, how: str) -> str:
        """On a killed member: leave a damaged record after the durable end of its WAL, as a
        crash in the middle of a write does: "torn" (only the first half of the record made
        it) or "bitflip" (whole, with one bit flipped).  The record copies the last valid
        one, so a reader that failed to detect the damage would apply a duplicate batch.

        Damaging bytes that were fsynced (and so acknowledged to the leader) would be a disk
        that lies, which Raft does not survive: etcd stops with "tocommit is out of range".
        """
        from store.wal.record import scan  # noqa: PLC0415 - only this lever needs the record format

        segs = list_segments(self.local.member_dir(member_id) / "wal")
        if not segs:
            return "no WAL segment"
        path = segs[-1].path
        buf = path.read_bytes()
        s = scan(buf, str(path))
        if len(s.records) < 2:
            return f"{path.name}: no record after the header"
        off, end = s.records[-1][0], s.end
        record = bytearray(buf[off:end])
        if how == "torn":
            damaged = bytes(record[: max(1, len(record) // 2)])
            what = f"the first {len(damaged)} of {len(record)} bytes of a record"
        else:
            pos = len(record) * 3 // 4
            record[pos] ^= 0x10
            damaged = bytes(record)
            what = f"a {len(record)}-byte record with bit 4 of byte {pos} flipped"
        os.truncate(path, end)
        with path.open("ab") as f:
            f.write(damaged)
        return f"{path.name}: {what} written after the durable end ({end})"

    def log_mentions(self, member_id: int, text: str) -> bool:
        try:
            return text in (self.local.member_dir(member_id) / "member.log").read_text(errors="replace")
        except FileNotFoundError:
            return False

    def disk_full(self, on: bool) -> None:
        """The shared "disk": every member's writes fail with ENOSPC while the flag exists."""
        if on:
            self.disk_full_flag.write_text("enospc\n")
        else:
            with contextlib.suppress(FileNotFoundError):
                self.disk_full_flag.unlink()

    # ------------------------------------------------------------------ failpoints
    def failpoint(self, member_id: int, name: str, action: str | None) -> None:
        """Arm (`action`, e.g. "1*crash", "sleep(1500)") or disarm (None) a failpoint at runtime."""
        url = f"{self.info(member_id).http_url}/debug/failpoints/{name}"
        data = action.encode() if action is not None else None
        req = urllib.request.Request(url, data=data, method="PUT" if action is not None else "DELETE")
        with urllib.request.urlopen(req, timeout=2) as r:
            r.read()

    def failpoint_hits(self, member_id: int) -> dict[str, Any]:
        url = f"{self.info(member_id).http_url}/debug/failpoints"
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                doc: dict[str, Any] = json.loads(r.read())
                return doc
        except (OSError, urllib.error.URLError, ValueError):
            return {}

    # ------------------------------------------------------------------ state
    async def statuses(self, only: Iterable[int] | None = None) -> dict[int, dict[str, Any] | None]:
        """Each member's status (None: no answer), asked concurrently; `only` limits the
        poll to some members, so that a dead one does not set its pace."""

        async def one(m: MemberInfo) -> dict[str, Any] | None:
            c = self.client([m.client_url], timeout=0.5, connect_timeout=0.3)
            try:
                return (await c.status(endpoint=m.client_url)).to_json()
            except (StoreError, OSError):
                return None
            finally:
                await c.close()

        members = self.local.members()
        if only is not None:
            wanted = set(only)
            members = [m for m in members if m.id in wanted]
        found = await asyncio.gather(*(one(m) for m in members))
        return {m.id: s for m, s in zip(members, found, strict=True)}

    async def leader(self, timeout: float = 10.0, exclude: tuple[int, ...] = ()) -> int:
        """The leader the live members agree on, waiting for one (bounded); 0 if none."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = await self.statuses()
            live = {i: s for i, s in st.items() if s is not None and i not in exclude}
            leaders = [i for i, s in live.items() if s["role"] == "leader"]
            if len(leaders) == 1 and all(s["leader"] == leaders[0] for s in live.values()):
                return leaders[0]
            await asyncio.sleep(0.05)
        return 0

    async def wait_revision(self, revision: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = await self.statuses()
            if all(s is not None and s["revision"] >= revision for s in st.values()):
                return True
            await asyncio.sleep(0.1)
        return False

    async def hashes(self, revision: int) -> dict[int, tuple[int, int, int]]:
        """member -> (hash, revision, compact revision) at `revision`."""
        out: dict[int, tuple[int, int, int]] = {}
        for m in self.local.members():
            c = self.client([m.client_url], timeout=5)
            try:
                h, compact, rev = await c.hash_kv(m.client_url, revision)
                out[m.id] = (h, rev, compact)
            except StoreError:
                continue
            finally:
                await c.close()
        return out

    def apply_logs(self) -> dict[int, list[list[Any]]]:
        logs: dict[int, list[list[Any]]] = {}
        for d in sorted(self.local.root.glob("member-*")):
            f = d / APPLY_LOG_FILE
            if f.exists():
                logs[int(d.name.split("-")[1])] = list(read_apply_log(f))
        return logs

    # ------------------------------------------------------------------ membership
    async def replace(self, member_id: int, leader_url: str) -> int:
        """Remove a member, wipe its data, add a fresh one in its place (new id): what an
        operator does with a broken disk.  Returns the new member's id."""
        async with self.client(self.client_urls(), timeout=10) as c:
            await c.member_remove(member_id)
        await asyncio.to_thread(self.local.stop_member, member_id, 2.0)
        shutil.rmtree(self.local.member_dir(member_id), ignore_errors=True)
        self.local.forget_member(member_id)
        new_id = max([*self.ids(), member_id]) + 1
        c_port, p_port, h_port = free_ports(3)
        peer, client, http = self.local.new_member_urls(new_id) or [
            f"tcp://127.0.0.1:{p_port}",
            f"tcp://127.0.0.1:{c_port}",
            f"http://127.0.0.1:{h_port}",
        ]
        info = MemberInfo(new_id, f"m{new_id}", peer, client, http, True)
        async with self.client(self.client_urls(), timeout=10) as c:
            added = await c.member_add(info.name, info.peer_url, info.client_url, info.http_url, learner=True)
        info = MemberInfo(added.id, info.name, info.peer_url, info.client_url, info.http_url, True)
        self.local.add_member_layout(info)
        await asyncio.to_thread(self._start, info.id)
        # Promote once it has caught up (the leader refuses before that).
        deadline = time.monotonic() + 20
        async with self.client(self.client_urls(), timeout=5) as c:
            while time.monotonic() < deadline:
                try:
                    await c.member_promote(info.id)
                    break
                except StoreError:
                    await asyncio.sleep(0.2)
        return info.id

    def data_size(self) -> int:
        return sum(f.stat().st_size for f in Path(self.local.root).rglob("*") if f.is_file())
