"""The systems under test, behind one interface: start, find the leader, kill, restart, stop.

Each runs its members as separate processes on free 127.0.0.1 ports under a temp dir, with
fsync on (raftkube: `fsync = true`; etcd: its default; pysyncobj: journal file on, which it
never fsyncs).  Two etcd releases can run: Debian's etcd 3.4 (`etcd`) and the etcd 3.6 that
`raftkube peers build` builds into the peers cache (`etcd36`), each with its own release's
defaults, behind the same command line and spoken to by the same v3 gRPC client.  raftkube and
both etcds run either in plaintext or with mutual TLS on their client and peer ports
(`tls=True`), with certificates from the same kind of CA (bench/store/tls.py); pysyncobj has
no TLS.  Every wait is bounded; every process is registered in `procs` and killed by
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

SYSTEMS = ("raftkube", "etcd", "etcd36", "pysyncobj")


class PeerError(Exception):
    """A system could not be started or did not become healthy in time."""


class Peer(ABC):
    name: str
    """raftkube | etcd | etcd36 | pysyncobj."""
    protocol: str
    """The client its load generators speak (bench.store.adapters): etcd for both etcd releases."""

    def __init__(self, root: Path, members: int, tls: bool = False) -> None:
        self.tls = tls
        self.root = root / self.label
        self.members = members
        self.ids = list(range(1, members + 1))
        self.client_tls: ClientTLS | None = None
        """The files a client of this cluster uses; set by `start` when it runs with TLS."""

    @property
    def label(self) -> str:
        """How results name it: raftkube, raftkube+tls, etcd, etcd+tls, etcd36, etcd36+tls, pysyncobj."""
        return self.name + ("+tls" if self.tls else "")

    def client_spec(self) -> dict[str, Any]:
        """What a load generator's spec needs to reach it: the client it speaks, and the TLS files if any."""
        spec: dict[str, Any] = {"system": self.protocol}
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
    name = protocol = "raftkube"

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


def etcd36_binary() -> str:
    """The etcd 3.6 `raftkube peers build` built, checked as `raftkube up --apiserver upstream`
    checks it (in the manifest, unchanged, answering its pinned release); PeerError naming the
    build command when it is not: a run that asked for etcd36 never goes on without it."""
    from bench.peers.upstream import PeerUnavailable, check_peers

    try:
        return str(check_peers(("etcd",))["etcd"])
    except PeerUnavailable as e:
        raise PeerError(f"etcd 3.6 is not built: {e}") from None


def etcd_version(binary: str | None = None) -> str:
    """What `binary --version` (Debian's etcd 3.4 by default) says its release is."""
    try:
        out = subprocess.run(
            [binary or etcd_binary(), "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired, PeerError):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("etcd Version:"):
            return line.split(":", 1)[1].strip()
    return out.strip()


def etcd36_version() -> str:
    """The built etcd 3.6's own answer to `--version` ("not built" without one), for the
    machine section of the results, which is written whether or not etcd36 ran."""
    from machinery.process import peers

    path = peers.peer_path("etcd")
    return etcd_version(str(path)) if path.is_file() else "not built"


ETCD_DEFAULTS = {
    "etcd": {"snapshot_count": 100_000, "bbolt_freelist": "array"},
    "etcd36": {"snapshot_count": 10_000, "bbolt_freelist": "map"},
}
"""Where the two releases' defaults differ in ways a benchmark feels (from each binary's `--help`):
both run with their own, as shipped, and the results say which."""


class EtcdPeer(Peer):
    """Debian's etcd 3.4, /usr/bin/etcd."""

    name = "etcd"
    protocol = "etcd"

    def __init__(self, root: Path, members: int, tls: bool = False) -> None:
        super().__init__(root, members, tls)
        self.binary = self.find_binary()
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

    @staticmethod
    def find_binary() -> str:
        return etcd_binary()

    def _argv(self, m: int) -> list[str]:
        """The same flags for 3.4 and 3.6: every one is in both releases' `--help` (3.6 dropped
        the v2 store and capnslog, and renamed the --experimental-* flags, none of which is
        used here; --logger=zap is 3.4's opt-in and 3.6's only logger)."""
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
        return etcd_version(self.binary)

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"fsync": True, "heartbeat_ms": 100, "election_ms": 1000} | ETCD_DEFAULTS[self.name]


class Etcd36Peer(EtcdPeer):
    """etcd 3.6 as `raftkube peers build` built it, in the peers cache."""

    name = "etcd36"

    @staticmethod
    def find_binary() -> str:
        return etcd36_binary()


# ====================================================================== pysyncobj
def pysyncobj_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pysyncobj")
    except PackageNotFoundError:
        return "not installed"


class SyncobjPeer(Peer):
    name = protocol = "pysyncobj"

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
    if name == "etcd36":
        return Etcd36Peer(root, members, tls)
    if name == "pysyncobj":
        return SyncobjPeer(root, members, tls)
    raise ValueError(f"unknown system {name!r} (known: {', '.join(SYSTEMS)})")
