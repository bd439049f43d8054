"""A real apiserver process with extra users and flags, and raw TLS clients to attack it with.

Used by test_edge_attacks.py (and, before the fixes, to measure the attacks): the apiserver runs
over a one-member raftkube store, with `--authorization-mode
AlwaysAllow` so that users `eve` and `bob` (static tokens, no groups besides
system:authenticated) may list and watch without RBAC set-up; the admin token is in group
system:masters.  The attack clients speak HTTP/1.1 over asyncio TLS streams by hand, so that
the test controls every byte (one header byte a second, a watch that never reads).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from apiserver.launcher import Endpoint, LocalApiserver
from machinery.process import disk
from machinery.process.launch import free_ports
from store.launcher import LocalCluster
from tests.support.cli import raftkube
from tests.support.paths import HOST_NETWORK

USERS = ("eve", "bob")


@dataclass
class EdgeServer:
    """One apiserver process: its pid, address and a token per user (`admin` included)."""

    server: LocalApiserver
    endpoint: Endpoint
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        pid = self.server.pid()
        assert pid is not None, "the apiserver is not running"
        return pid

    def rss_mib(self) -> float:
        """The process's resident set now (VmRSS), in MiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS in /proc status")

    def ready(self) -> bool:
        return self.server.probe(self.endpoint, timeout=5.0)[0] == 200

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.server.pki.ca))

    def open_connections(self) -> int:
        """TCP connections the server holds on its port (from /proc/<pid>/net/tcp), any state but LISTEN."""
        port = f"{self.endpoint.port:04X}"
        count = 0
        for table in ("tcp", "tcp6"):
            path = Path(f"/proc/{self.pid}/net/{table}")
            if not path.exists():
                continue
            for line in path.read_text().splitlines()[1:]:
                cols = line.split()
                local, state = cols[1], cols[3]
                # 0A = LISTEN, 06 = TIME_WAIT (no socket left in the process)
                if local.endswith(":" + port) and state not in ("0A", "06"):
                    count += 1
        return count


@contextlib.contextmanager
def edge_server(tmp: Path, *flags: str) -> Iterator[EdgeServer]:
    """An apiserver over a fresh one-member raftkube store with `flags`, users eve and bob besides
    admin; every process stopped by pid."""
    data_dir = tmp / "rk"
    config = tmp / "cluster.toml"
    config.write_text("[store]\nmembers = 1\n[store.raft]\ntick_ms = 20\n" + HOST_NETWORK)
    up = raftkube(
        "store",
        "up",
        "--detach",
        "--free-ports",
        "--members",
        "1",
        "--data-dir",
        str(data_dir),
        "--config",
        str(config),
        timeout=60,
    )
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        server = LocalApiserver(data_dir)
        endpoint = Endpoint("127.0.0.1", free_ports(1)[0], "")
        server.pki.ensure(endpoint.host)
        tokens = {name: secrets.token_urlsafe(24) for name in USERS}
        lines = server.pki.tokens.read_text() + "".join(f"{t},{n},{n}\n" for n, t in tokens.items())
        disk.write_private(server.pki.tokens, lines.encode())
        admin = server.pki.admin_token()
        assert admin is not None
        tokens["admin"] = admin
        try:
            server.start(endpoint, extra_args=("--authorization-mode", "AlwaysAllow", *flags))
            server.wait_ready(endpoint, 60)
            yield EdgeServer(server, endpoint, tokens)
        finally:
            server.stop(timeout=5)
    finally:
        LocalCluster(data_dir).stop_all(timeout=5)


@dataclass
class Answer:
    """The head of a response read off a raw connection (the connection stays open)."""

    status: int
    headers: dict[str, str]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        """Drop the connection at once (the client goes away).  Not writer.close(): a TLS close
        waits for round trips that asyncio.run's end does not give it, and the socket under it
        would be left for the garbage collector (a ResourceWarning in whichever test it runs)."""
        self.writer.transport.abort()


async def connect(srv: EdgeServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(srv.endpoint.host, srv.endpoint.port, ssl=srv.tls(), limit=1 << 20)


def request_bytes(srv: EdgeServer, path: str, token: str, method: str = "GET") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: {srv.endpoint.host}:{srv.endpoint.port}\r\n"
        f"Authorization: Bearer {token}\r\nAccept: application/json\r\n\r\n"
    ).encode()


async def request_head(srv: EdgeServer, path: str, user: str, timeout: float = 20.0) -> Answer:
    """Send GET `path` as `user` on a new connection and read the status line and headers."""
    reader, writer = await connect(srv)
    writer.write(request_bytes(srv, path, srv.tokens[user]))
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    return Answer(status, headers, reader, writer)


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Whether the server closes the connection (EOF or reset) within `seconds`."""
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            data = await asyncio.wait_for(reader.read(65536), left)
            if not data:
                return True
    except TimeoutError:
        return False
    except (ConnectionError, ssl.SSLError):
        return True
    return False
