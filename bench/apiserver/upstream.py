"""kube-apiserver 1.33 over etcd 3.6 as a server under test of `raftkube bench apiserver
--servers raftkube,kube-apiserver`: what a user would run instead of ours.

Set up as our apiserver's rows are, so that the rows differ by the server alone: three etcd
members (bench.store's EtcdPeer with the built etcd 3.6 binary, its default fsync), plaintext
between the apiserver and etcd, HTTPS on a free loopback port with our apiserver's
credentials (bench.peers.upstream builds the command line: Node,RBAC, NodeRestriction), the
load generators on the admin token.  Its pid and etcd's are tracked by bench.store.procs,
so that the run's kill_all leaves nothing behind.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apiserver.launcher import Endpoint, LocalApiserver
from bench.apiserver.backends import Backend, BackendError
from bench.apiserver.http11 import Target
from bench.peers.upstream import ApiserverSpec, check_peers, kube_apiserver_argv
from bench.store import procs
from bench.store.peers import EtcdPeer
from machinery.process import peers
from machinery.process.launch import free_ports, spawn

NAME = "kube-apiserver"
MEMBERS = 3


class Etcd36Peer(EtcdPeer):
    """EtcdPeer on the etcd 3.6 that `raftkube peers build` made (not the machine's 3.4)."""

    name = "etcd36"

    def __init__(self, root: Path, members: int, tls: bool = False) -> None:
        super().__init__(root, members, tls)
        self.binary = str(check_peers(("etcd",))["etcd"])

    def version(self) -> str:
        return peers.ETCD_VERSION.lstrip("v")


@dataclass
class UpstreamBackend(Backend):
    def describe(self) -> dict[str, Any]:
        return {
            "server": f"kube-apiserver {peers.KUBERNETES_VERSION}",
            "store": {"members": MEMBERS, "fsync": True, "tls": False, "version": self.peer.version()},
            "storage_url": self.endpoint.storage,
            "apiserver_url": self.endpoint.url,
        }


def kube_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False)
    return out.stdout.strip()


def start(root: Path, timeout: float = 120.0) -> Backend:
    """etcd 3.6 (three members), then kube-apiserver over it; ready, or BackendError."""
    binary = check_peers((NAME,))[NAME]
    peer = Etcd36Peer(root / "etcd", MEMBERS)
    peer.start(min(timeout, 60.0))
    apiserver = LocalApiserver(root)
    creds = apiserver.pki
    creds.ensure("127.0.0.1")
    servers = tuple(f"http://{e}" for e in peer.endpoints)
    endpoint = Endpoint("127.0.0.1", free_ports(1)[0], ",".join(servers))
    apiserver.record(endpoint)
    spec = ApiserverSpec(endpoint.port, servers, None, creds, creds.kubelet_client())
    pid = spawn(kube_apiserver_argv(binary, spec), apiserver.log_file, apiserver.root / "pid")
    procs.track(pid)
    try:
        apiserver.wait_ready(endpoint, timeout)
    except Exception as e:
        procs.kill(pid)
        peer.stop()
        raise BackendError(f"kube-apiserver over etcd 3.6 did not become ready: {e}") from e
    token = creds.admin_token()
    if token is None:
        raise BackendError(f"no admin token in {creds.tokens}")
    target = Target("127.0.0.1", endpoint.port, str(creds.ca), token)
    return UpstreamBackend(NAME, peer, apiserver, endpoint, pid, target)


def ensure_service_accounts(backend: Backend, namespaces: list[str]) -> None:
    """The `default` ServiceAccount of each namespace, which kube's ServiceAccount admission
    requires of every pod (its controller-manager makes them; no controller-manager runs
    here).  Made on every server of a run with kube-apiserver, so that both sides admit the
    same pods: with it our apiserver mounts the token volume into each pod as kube does."""
    import orjson

    for ns in namespaces:
        body = orjson.dumps({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        r = backend.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", body)
        if r.status not in (201, 409):
            raise BackendError(f"creating serviceaccount {ns}/default: HTTP {r.status} {r.body[:200]!r}")
