"""The systems under test, behind one interface: start, find the leader, kill, restart, stop.

Each runs its members as separate processes on free 127.0.0.1 ports under a temp dir, with
fsync on (raftkube: `fsync = true`; etcd: its default; pysyncobj: journal file on, which it
never fsyncs).  raftkube and etcd run either in plaintext or with mutual TLS on their client
and peer ports (`tls=True`), with certificates from the same kind of CA (bench/store/tls.py);
pysyncobj has no TLS.  Every wait is bounded; every process is registered in `procs` and killed by
pid when the benchmark ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from apiserver.storage.etcd_client import EtcdClient, EtcdError
from bench.store import procs
from bench.store.syncobj_service import SyncobjClient, SyncobjError
from bench.store.tls import ClientTLS, EtcdMemberTLS, etcd_pki
from machinery.process.launch import free_ports, port_free
from machinery.process.pki import CA_CERT
from store.client.layout import CLIENT_NAME
from store.config import StoreSettings, load_store_settings
from store.launcher import LocalCluster

SYSTEMS = ("raftkube", "etcd", "pysyncobj")


class PeerError(Exception):
    """A system could not be started or did not become healthy in time."""


class Peer(ABC):
    name: str
    """raftkube | etcd | pysyncobj."""

    def __init__(self, root: Path, members: int, tls: bool = False) -> None:
        self.tls = tls
        self.root = root / self.label
        self.members = members
        self.ids = list(range(1, members + 1))
        self.client_tls: ClientTLS | None = None
        """The files a client of this cluster uses; set by `start` when it runs with TLS."""

    @property
    def label(self) -> str:
        """How results name it: raftkube, raftkube+tls, etcd, etcd+tls, pysyncobj."""
        return self.name + ("+tls" if self.tls else "")

    def client_spec(self) -> dict[str, Any]:
        """What a load generator's spec needs to reach it: the system, and the TLS files if any."""
        spec: dict[str, Any] = {"system": self.name}
        if self.client_tls is not None:
            spec["tls"] = self.client_tls.to_json()
        return spec

    @abstractmethod
    def start(self, timeout: float = 30.0) -> None:
        """Start every member and wait until they agree on a leader."""

    @abstractmethod
    def endpoint(self, member: int) -> str: ...

    @property
    def endpoints(self) -> list[str]:
        return [self.endpoint(m) for m in self.ids]

    @abstractmethod
    def pid(self, member: int) -> int | None: ...

    def pids(self) -> list[int]:
        return [p for p in (self.pid(m) for m in self.ids) if p is not None]

    @abstractmethod
    def start_member(self, member: int) -> None: ...

    @abstractmethod
    def ports(self, member: int) -> list[int]:
        """Every port the member listens on."""

    def wait_ports_free(self, member: int, timeout: float = 30.0) -> float:
        """Seconds until the ports of a killed member can be bound again (bounded wait).

        Right after a SIGKILL the kernel may still hold a port briefly; a restart timed from
        before this would measure the kernel, not the system."""
        t0 = time.monotonic()
        while not all(port_free("127.0.0.1", p) for p in self.ports(member)):
            if time.monotonic() - t0 > timeout:
                raise PeerError(f"{self.name} member {member}: ports {self.ports(member)} still busy after {timeout}s")
            time.sleep(0.01)
        return time.monotonic() - t0

    def kill_member(self, member: int) -> float:
        """SIGKILL one member; the monotonic time of the kill."""
        pid = self.pid(member)
        if pid is None:
            raise PeerError(f"{self.name} member {member} is not running")
        t = time.monotonic()
        procs.kill(pid, signal.SIGKILL)
        return t

    @abstractmethod
    async def _roles(self) -> dict[int, int | None]:
        """member -> the leader it reports (None: no answer or no leader)."""

    def leader(self, timeout: float = 30.0, exclude: tuple[int, ...] = ()) -> int:
        """The member that all running members name as leader (bounded wait)."""
        deadline = time.monotonic() + timeout
        last: dict[int, int | None] = {}
        while time.monotonic() < deadline:
            last = asyncio.run(self._roles())
            live = {m: lead for m, lead in last.items() if lead is not None and m not in exclude}
            leads = set(live.values())
            if len(live) >= self.members // 2 + 1 and len(leads) == 1:
                (lead,) = leads
                if lead in live or lead not in exclude:
                    return lead
            time.sleep(0.05)
        raise PeerError(f"{self.name}: no agreed leader within {timeout:.0f}s (last: {last})")

    def wait_healthy(self, member: int, timeout: float = 30.0) -> float:
        """Seconds until `member` answers and knows the (agreed) leader."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            roles = asyncio.run(self._roles())
            if roles.get(member) is not None:
                return time.monotonic() - t0
            time.sleep(0.05)
        raise PeerError(f"{self.name} member {member} not healthy within {timeout:.0f}s")

    def followers(self, leader: int) -> list[int]:
        return [m for m in self.ids if m != leader]

    def stop(self) -> None:
        for m in self.ids:
            pid = self.pid(m)
            if pid is not None:
                procs.kill(pid, signal.SIGKILL)

    def version(self) -> str:
        return ""

    def describe(self) -> dict[str, Any]:
        return {"members": self.members, "version": self.version()}


# ====================================================================== raftkube
class RaftkubePeer(Peer):
    name = "raftkube"

    def __init__(self, root: Path, members: int, config: Path | None = None, tls: bool = False) -> None:
        super().__init__(root, members, tls)
        base = load_store_settings(config) if config is not None and config.exists() else StoreSettings()
        self.settings = dataclasses.replace(base, members=members, data_dir=self.root, fsync=True)
        self.local = LocalCluster(self.root)
        self._urls: dict[int, str] = {}
        self._http: dict[int, str] = {}
        self._ssl: ssl.SSLContext | None = None

    def start(self, timeout: float = 30.0) -> None:
        infos = self.local.create(self.settings, ports=free_ports(3 * self.members), insecure=not self.tls)
        self._urls = {m.id: m.client_url for m in infos}
        self._http = {m.id: m.http_url for m in infos}
        if self.tls:
            d = self.local.pki_dir
            self.client_tls = ClientTLS(str(d / CA_CERT), str(d / f"{CLIENT_NAME}.crt"), str(d / f"{CLIENT_NAME}.key"))
            self._ssl = self.local.client_tls()
        for m in self.ids:
            self.start_member(m)
        self.leader(timeout)

    def endpoint(self, member: int) -> str:
        return self._urls[member]

    def http_url(self, member: int) -> str:
        """The member's /health and /metrics endpoint (plain HTTP)."""
        return self._http[member]

    def ports(self, member: int) -> list[int]:
        m = next(i for i in self.local.members() if i.id == member)
        return [int(u.rsplit(":", 1)[1]) for u in (m.client_url, m.peer_url, m.http_url)]

    def pid(self, member: int) -> int | None:
        return self.local.pid(member)

    def start_member(self, member: int) -> None:
        procs.track(self.local.start_member(member))

    def kill_member(self, member: int) -> float:
        pid = self.pid(member)
        if pid is None:
            raise PeerError(f"raftkube member {member} is not running")
        t = time.monotonic()
        self.local.kill_member(member)
        return t

    async def _roles(self) -> dict[int, int | None]:
        from store.api.errors import StoreError
        from store.client.client import Client

        async def one(m: int) -> int | None:
            c = Client([self.endpoint(m)], timeout=0.5, connect_timeout=0.3, tls=self._ssl)
            try:
                st = await c.status(endpoint=self.endpoint(m))
                return st.leader or None
            except (StoreError, OSError):
                return None
            finally:
                await c.close()

        return dict(zip(self.ids, await asyncio.gather(*(one(m) for m in self.ids)), strict=True))

    def stop(self) -> None:
        for m in self.ids:
            pid = self.pid(m)
            if pid is not None:
                self.local.kill_member(m)

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as v

        try:
            return v("raftkube")
        except PackageNotFoundError:
            return "unknown"

    def describe(self) -> dict[str, Any]:
        s = self.settings
        return super().describe() | {
            "fsync": s.fsync,
            "tick_ms": s.raft.tick_ms,
            "election_ticks": s.raft.election_ticks,
            "snapshot_count": s.snapshot_count,
        }


# ====================================================================== etcd
def etcd_binary() -> str:
    path = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)
    if path is None:
        raise PeerError("etcd is not installed (expected /usr/bin/etcd; on Debian: apt-get install etcd-server)")
    return path


def etcd_version() -> str:
    try:
        out = subprocess.run(
            [etcd_binary(), "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("etcd Version:"):
            return line.split(":", 1)[1].strip()
    return out.strip()


class EtcdPeer(Peer):
    name = "etcd"

    def __init__(self, root: Path, members: int, tls: bool = False) -> None:
        super().__init__(root, members, tls)
        self.binary = etcd_binary()
        self.scheme = "https" if tls else "http"
        self.member_tls: dict[int, EtcdMemberTLS] = {}
        ports = free_ports(2 * members)
        self.client_ports = {m: ports[2 * (m - 1)] for m in self.ids}
        self.peer_ports = {m: ports[2 * (m - 1) + 1] for m in self.ids}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._started: set[int] = set()

    def endpoint(self, member: int) -> str:
        return f"127.0.0.1:{self.client_ports[member]}"

    def ports(self, member: int) -> list[int]:
        return [self.client_ports[member], self.peer_ports[member]]

    def _argv(self, m: int) -> list[str]:
        http = self.scheme
        cluster = ",".join(f"m{i}={http}://127.0.0.1:{self.peer_ports[i]}" for i in self.ids)
        argv = [
            self.binary,
            f"--name=m{m}",
            f"--data-dir={self.root / f'm{m}'}",
            f"--listen-client-urls={http}://127.0.0.1:{self.client_ports[m]}",
            f"--advertise-client-urls={http}://127.0.0.1:{self.client_ports[m]}",
            f"--listen-peer-urls={http}://127.0.0.1:{self.peer_ports[m]}",
            f"--initial-advertise-peer-urls={http}://127.0.0.1:{self.peer_ports[m]}",
            f"--initial-cluster={cluster}",
            "--initial-cluster-state=new",
            "--initial-cluster-token=bench",
            "--logger=zap",
            "--log-level=warn",
        ]
        if self.tls:
            f = self.member_tls[m]
            argv += [
                f"--cert-file={f.cert}",
                f"--key-file={f.key}",
                f"--trusted-ca-file={f.ca}",
                "--client-cert-auth",
                f"--peer-cert-file={f.cert}",
                f"--peer-key-file={f.key}",
                f"--peer-trusted-ca-file={f.ca}",
                "--peer-client-cert-auth",
            ]
        return argv

    def start(self, timeout: float = 30.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.tls and not self.member_tls:
            self.member_tls, self.client_tls = etcd_pki(self.root, self.ids)
        for m in self.ids:
            self.start_member(m)
        self.leader(timeout)

    def start_member(self, member: int) -> None:
        self.procs[member] = procs.spawn(self._argv(member), log=self.root / f"m{member}.log")

    def pid(self, member: int) -> int | None:
        p = self.procs.get(member)
        return p.pid if p is not None and p.poll() is None else None

    async def _roles(self) -> dict[int, int | None]:
        c = EtcdClient(self.endpoints, timeout=0.5, tls=self.client_tls)
        try:

            async def one(m: int) -> tuple[int, int] | None:
                try:
                    st = await c.status(self.endpoint(m))
                except EtcdError:
                    return None
                return st.header.member_id, st.leader

            answers = await asyncio.gather(*(one(m) for m in self.ids))
        finally:
            await c.close()
        ids = {a[0]: m for m, a in zip(self.ids, answers, strict=True) if a is not None}
        return {m: (ids.get(a[1]) if a is not None and a[1] else None) for m, a in zip(self.ids, answers, strict=True)}

    def version(self) -> str:
        return etcd_version()


# ====================================================================== pysyncobj
def pysyncobj_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pysyncobj")
    except PackageNotFoundError:
        return "not installed"


class SyncobjPeer(Peer):
    name = "pysyncobj"

    def __init__(self, root: Path, members: int, tls: bool = False) -> None:
        if tls:
            raise PeerError("pysyncobj has no TLS")
        super().__init__(root, members)
        ports = free_ports(2 * members)
        self.client_ports = {m: ports[2 * (m - 1)] for m in self.ids}
        self.raft_ports = {m: ports[2 * (m - 1) + 1] for m in self.ids}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def endpoint(self, member: int) -> str:
        return f"127.0.0.1:{self.client_ports[member]}"

    def ports(self, member: int) -> list[int]:
        return [self.client_ports[member], self.raft_ports[member]]

    def raft_addr(self, member: int) -> str:
        return f"127.0.0.1:{self.raft_ports[member]}"

    def start(self, timeout: float = 30.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for m in self.ids:
            self.start_member(m)
        self.leader(timeout)

    def start_member(self, member: int) -> None:
        argv = [sys.executable, "-m", "bench.store.syncobj_service", "--self", self.raft_addr(member)]
        for o in self.ids:
            if o != member:
                argv += ["--partner", self.raft_addr(o)]
        argv += ["--port", str(self.client_ports[member]), "--data-dir", str(self.root / f"m{member}")]
        self.procs[member] = procs.spawn(argv, log=self.root / f"m{member}.log", cwd=_package_root())

    def pid(self, member: int) -> int | None:
        p = self.procs.get(member)
        return p.pid if p is not None and p.poll() is None else None

    async def _roles(self) -> dict[int, int | None]:
        by_addr = {self.raft_addr(m): m for m in self.ids}

        async def one(m: int) -> int | None:
            c = SyncobjClient(self.endpoint(m), timeout=0.5)
            try:
                st = await c.status()
            except (SyncobjError, OSError, TimeoutError):
                return None
            finally:
                await c.close()
            if not st.get("ready") or not st.get("leader"):
                return None
            return by_addr.get(st["leader"])

        return dict(zip(self.ids, await asyncio.gather(*(one(m) for m in self.ids)), strict=True))

    def version(self) -> str:
        return pysyncobj_version()

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"journal_file": True, "fsync": False}


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def make_peer(name: str, root: Path, members: int, config: Path | None = None, tls: bool = False) -> Peer:
    if name == "raftkube":
        return RaftkubePeer(root, members, config, tls)
    if name == "etcd":
        return EtcdPeer(root, members, tls)
    if name == "pysyncobj":
        return SyncobjPeer(root, members, tls)
    raise ValueError(f"unknown system {name!r} (known: {', '.join(SYSTEMS)})")
