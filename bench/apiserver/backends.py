"""One storage backend with one apiserver over it: started, found, stopped by pid.

raftkube: 3 members through bench.store's RaftkubePeer (the store launcher, fsync on);
etcd: three etcd 3.4 members through bench.store's EtcdPeer (its default fsync).  Both on free
127.0.0.1 ports, both in plaintext between the apiserver and the store, so that the two
rows differ by the store alone (the apiserver's etcd:// storage has no TLS flag yet).  The
apiserver is `raftkube apiserver` started by apiserver.launcher (HTTPS on a free port, its
credentials created in its own data dir); load generators authenticate with its admin token.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from apiserver.launcher import Endpoint, LocalApiserver
from bench.apiserver.http11 import Connection, HTTPError, Response, Target
from bench.store import procs
from bench.store.peers import EtcdPeer, Peer, RaftkubePeer, etcd_version
from machinery.process.launch import free_ports

BACKENDS = ("raftkube", "etcd")
MEMBERS = {"raftkube": 3, "etcd": 3}  # replicated on both sides: what a user would run


class BackendError(Exception):
    """The store or the apiserver did not start, or a set-up request failed."""


@dataclass
class Backend:
    name: str
    peer: Peer
    apiserver: LocalApiserver
    endpoint: Endpoint
    pid: int
    target: Target

    def store_pids(self) -> list[int]:
        return self.peer.pids()

    def describe(self) -> dict[str, Any]:
        store = (
            {"members": MEMBERS["raftkube"], "fsync": True, "tls": False, "version": _version("raftkube")}
            if self.name == "raftkube"
            else {"members": MEMBERS["etcd"], "fsync": True, "tls": False, "version": etcd_version()}
        )
        return {"store": store, "storage_url": self.endpoint.storage, "apiserver_url": self.endpoint.url}

    def stop(self) -> None:
        procs.kill(self.pid)
        self.peer.stop()

    def request(self, method: str, path: str, body: bytes | None = None) -> Response:
        """One request from the driver (set-up and checks), on a fresh connection."""
        return asyncio.run(_request(self.target, method, path, body))


async def _request(target: Target, method: str, path: str, body: bytes | None) -> Response:
    conn = Connection(target, target.ssl_context())
    try:
        return await conn.request(method, path, body)
    except (OSError, HTTPError) as e:
        raise BackendError(f"{method} {path}: {type(e).__name__}: {e}") from e
    finally:
        await conn.close()


def start(name: str, root: Path, config: Path | None, timeout: float = 60.0) -> Backend:
    """Start `name`'s store and an apiserver over it; both are registered with procs."""
    peer: Peer
    if name == "raftkube":
        peer = RaftkubePeer(root, MEMBERS[name], config, tls=False)
    elif name == "etcd":
        peer = EtcdPeer(root, MEMBERS[name])
    else:
        raise ValueError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
    peer.start(timeout)
    storage = f"{name}://" + ",".join(e.split("://", 1)[-1] for e in peer.endpoints)
    apiserver = LocalApiserver(root / f"{name}-apiserver")
    endpoint = Endpoint("127.0.0.1", free_ports(1)[0], storage)
    pid = apiserver.start(endpoint, insecure_store=True)
    procs.track(pid)
    try:
        apiserver.wait_ready(endpoint, timeout)
    except Exception as e:
        procs.kill(pid)
        peer.stop()
        raise BackendError(f"the apiserver over {name} did not become ready: {e}") from e
    token = apiserver.pki.admin_token()
    if token is None:
        raise BackendError(f"no admin token in {apiserver.pki.tokens}")
    target = Target("127.0.0.1", endpoint.port, str(apiserver.pki.ca), token)
    return Backend(name, peer, apiserver, endpoint, pid, target)


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def versions() -> dict[str, str]:
    """The Python packages the apiserver and the load generators run on."""
    return {d: _version(d) for d in ("uvicorn", "starlette", "orjson", "httpx", "grpcio")}
