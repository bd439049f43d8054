"""The upstream control plane's storage and API server as local processes: etcd 3.6 and
kube-apiserver 1.33, built by `raftkube peers build`, for mixed control planes (our
scheduler, controller-manager and kubelets on kube's API: `raftkube up --apiserver upstream`)
and the apiserver benchmark.

    <data_dir>/etcd/pid, etcd.log, data/          one etcd member (mutual TLS, loopback only)
    <data_dir>/etcd/etcd.json                     its ports, chosen free once
    <data_dir>/etcd/pki/                          its serving certificate and the apiserver's
                                                  client certificate, from the apiserver CA
    <data_dir>/apiserver/pid, apiserver.log       kube-apiserver, where `raftkube apiserver`'s
                                                  would be, so that LocalApiserver (`status`,
                                                  `down`, probes, the kubeconfig) finds it
    <data_dir>/apiserver/pki/, tokens.csv         the credentials of apiserver.pki, unchanged

kube-apiserver gets the same CA, serving certificate, token file and service-account key
our apiserver gets, so every kubeconfig `up` writes (system:kube-scheduler,
system:kube-controller-manager, system:node:<name> in system:nodes, admin in system:masters)
is valid against either server, and kube's Node authorizer and NodeRestriction admission
judge our kubelets as they would judge kube's.  Both processes listen only on 127.0.0.1, on
free ports, each in its own process group (machinery.process.launch), and are stopped by
their pid files.  A peer that is not built, or not at the pinned version, is a
`PeerUnavailable` (exit 2) naming `raftkube peers build --only ...`: never a silent skip.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from apiserver.launcher import Endpoint, LocalApiserver
from apiserver.pki import ApiserverPKI
from bench.peers.manifest import Manifest, State
from machinery.process import disk, peers, pki
from machinery.process.command import UsageError
from machinery.process.launch import LauncherError, free_ports, read_pid, spawn, stop_process

REQUIRED = ("etcd", "kube-apiserver")
HOST = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
"""Where kube allocates Services' cluster IPs (nothing routes them here)."""
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
ETCD_DIR = "etcd"
PID_FILE = "pid"
ETCD_LOG = "etcd.log"
ETCD_RECORD = "etcd.json"
ETCD_SERVER = "etcd-server"
ETCD_CLIENT = "apiserver-etcd-client"
STORE_SCHEME = "raftkube-etcd-api"
"""The storage recorded for kube-apiserver on raftkube's store (`raftkube-etcd-api://https://host:port`)."""
STORAGE_SCHEME = "upstream-etcd"
"""The storage recorded in apiserver.json for kube-apiserver (`upstream-etcd://host:port`):
no raftkube apiserver accepts it, so a plain `raftkube up` in this data dir fails loudly."""


class PeerUnavailable(UsageError):
    """A peer is not built, damaged, or not the pinned version: exit 2 with the build command."""


def check_peers(names: tuple[str, ...] = REQUIRED) -> dict[str, Path]:
    """Each peer's path, once it is built as the manifest recorded and answers `--version` with
    its pinned release; PeerUnavailable naming every one that is not, and the command that
    builds them."""
    found: dict[str, Path] = {}
    problems: list[str] = []
    bad: list[str] = []
    for name in names:
        version, path = peers.pinned_version(name), peers.peer_path(name)
        state = Manifest(path.parent).state(name, version)
        if state is not State.PRESENT:
            problems.append(f"{name} {version} is {state.value} ({path})")
            bad.append(name)
            continue
        try:
            answer = subprocess.run(
                [str(path), "--version"], capture_output=True, text=True, timeout=30, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            answer = f"no answer: {e}"
        if version.lstrip("v") not in answer:
            problems.append(f"{path} answers --version with {answer.strip()[:80]!r}, not {version}")
            bad.append(name)
            continue
        found[name] = path
    if problems:
        raise PeerUnavailable(f"{'; '.join(problems)}: build with `raftkube peers build --only {','.join(bad)}`")
    return found


# ---------------------------------------------------------------------- the command lines (pure)
@dataclass(frozen=True)
class EtcdSpec:
    data_dir: Path
    client_port: int
    peer_port: int
    tls: pki.CertFiles | None
    """Its serving certificate; with it clients must show one from the same CA (mutual TLS)."""
    host: str = HOST

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.client_port}"


def etcd_argv(binary: Path, spec: EtcdSpec) -> list[str]:
    """One etcd member alone in its cluster, on loopback; the peer port is loopback-only too."""
    peer = f"http://{spec.host}:{spec.peer_port}"
    argv = [
        str(binary),
        "--name=upstream",
        f"--data-dir={spec.data_dir}",
        f"--listen-client-urls={spec.client_url}",
        f"--advertise-client-urls={spec.client_url}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=upstream={peer}",
        "--initial-cluster-state=new",
        "--initial-cluster-token=raftkube-upstream",
        "--logger=zap",
        "--log-level=warn",
    ]
    if spec.tls is not None:
        argv += [
            f"--cert-file={spec.tls.cert}",
            f"--key-file={spec.tls.key}",
            f"--trusted-ca-file={spec.tls.ca}",
            "--client-cert-auth",
        ]
    return argv


@dataclass(frozen=True)
class EtcdStorage:
    """Where kube-apiserver keeps its objects: `--etcd-servers`, and the client certificate
    (with the CA that verifies the servers) it shows them; None: plaintext."""

    servers: tuple[str, ...]
    client: pki.CertFiles | None


@dataclass(frozen=True)
class ApiserverSpec:
    port: int
    etcd_servers: tuple[str, ...]
    etcd_client: pki.CertFiles | None
    """The client certificate shown to etcd (None: plaintext etcd)."""
    creds: ApiserverPKI
    kubelet_client: pki.CertFiles
    """What it shows kubelets (logs, exec, port-forward): apiserver-kubelet-client."""
    host: str = HOST


def kube_apiserver_argv(binary: Path, spec: ApiserverSpec) -> list[str]:
    """kube-apiserver with our credentials: serving certificate, client CA, static tokens,
    service-account keys, the certificate it shows kubelets; Node,RBAC with NodeRestriction,
    as kubeadm runs it.  The kubernetes Service's endpoints are not reconciled: its only
    address would be 127.0.0.1, which Endpoints validation refuses (a log line a second)."""
    c = spec.creds
    argv = [
        str(binary),
        f"--bind-address={spec.host}",
        f"--advertise-address={spec.host}",
        f"--secure-port={spec.port}",
        f"--etcd-servers={','.join(spec.etcd_servers)}",
        f"--tls-cert-file={c.serving.cert}",
        f"--tls-private-key-file={c.serving.key}",
        f"--client-ca-file={c.ca}",
        f"--token-auth-file={c.tokens}",
        f"--service-account-key-file={c.service_account_pub}",
        f"--service-account-signing-key-file={c.service_account_key}",
        f"--service-account-issuer={SA_ISSUER}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        f"--kubelet-client-certificate={spec.kubelet_client.cert}",
        f"--kubelet-client-key={spec.kubelet_client.key}",
        f"--kubelet-certificate-authority={c.ca}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        f"--cert-dir={c.root / 'cert-dir'}",
        "--profiling=false",
    ]
    if spec.etcd_client is not None:
        argv += [
            f"--etcd-cafile={spec.etcd_client.ca}",
            f"--etcd-certfile={spec.etcd_client.cert}",
            f"--etcd-keyfile={spec.etcd_client.key}",
        ]
    return argv


# ---------------------------------------------------------------------- the processes
class UpstreamControlPlane:
    """etcd and kube-apiserver of one data dir (see the module's layout)."""

    def __init__(self, data_dir: Path, host: str = HOST) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.apiserver = LocalApiserver(self.data_dir)
        self.creds = self.apiserver.pki
        self.etcd_dir = self.data_dir / ETCD_DIR

    @property
    def etcd_pid_file(self) -> Path:
        return self.etcd_dir / PID_FILE

    @property
    def etcd_log(self) -> Path:
        return self.etcd_dir / ETCD_LOG

    def pids(self) -> dict[str, int | None]:
        return {"etcd": read_pid(self.etcd_pid_file), "kube-apiserver": self.apiserver.pid()}

    def etcd_tls(self) -> tuple[pki.CertFiles, pki.CertFiles]:
        """etcd's serving certificate and kube-apiserver's client certificate for it, from the
        apiserver CA (made when missing)."""
        d = self.etcd_dir / "pki"
        ca = pki.load_files(self.creds.pki_dir, "ca")
        out = []
        for stem, server in ((ETCD_SERVER, True), (ETCD_CLIENT, False)):
            try:
                files = pki.load_files(d, stem)
            except pki.PKIError:
                files = pki.issue_cert(
                    ca, d, stem, common_name=stem, hosts=(self.host, "localhost") if server else (),
                    server=server, client=True,
                )  # fmt: skip
            out.append(files)
        return out[0], out[1]

    def etcd_spec(self) -> EtcdSpec:
        """Its ports as first chosen (recorded in etcd/etcd.json, so that a restart, and the
        kube-apiserver that dials it, find it where it was), or new free ones."""
        record = self.etcd_dir / ETCD_RECORD
        try:
            doc = json.loads(record.read_text())
            client_port, peer_port = int(doc["client_port"]), int(doc["peer_port"])
        except (OSError, ValueError, KeyError, TypeError):
            client_port, peer_port = free_ports(2, self.host)
            disk.make_dirs(self.etcd_dir)
            body = json.dumps({"client_port": client_port, "peer_port": peer_port}) + "\n"
            disk.write_private(record, body.encode())
        return EtcdSpec(self.etcd_dir / "data", client_port, peer_port, self.etcd_tls()[0], self.host)

    def start_etcd(self) -> int:
        """Spawn etcd (not waiting for it); its pid."""
        binary = check_peers(("etcd",))["etcd"]
        return spawn(etcd_argv(binary, self.etcd_spec()), self.etcd_log, self.etcd_pid_file)

    def start_apiserver(self, endpoint: Endpoint, storage: EtcdStorage | None = None) -> int:
        """Spawn kube-apiserver at `endpoint` over the recorded etcd, or over `storage` (not
        waiting); its pid."""
        binary = check_peers(("kube-apiserver",))["kube-apiserver"]
        self.creds.ensure(self.host)
        if storage is None:
            storage = EtcdStorage((self.etcd_spec().client_url,), self.etcd_tls()[1])
        spec = ApiserverSpec(endpoint.port, storage.servers, storage.client, self.creds, self.creds.kubelet_client())
        self.apiserver.record(endpoint)
        return spawn(kube_apiserver_argv(binary, spec), self.apiserver.log_file, self.apiserver.root / PID_FILE)

    def start(self, port: int | None = None, timeout: float = 120.0) -> Endpoint:
        """Start etcd, then kube-apiserver on `port` (a free one by default); return once
        /readyz answers 200 as admin.  Whatever started is stopped again on failure."""
        check_peers()
        self.creds.ensure(self.host)
        spec = self.etcd_spec()
        endpoint = Endpoint(
            self.host, port or free_ports(1, self.host)[0], f"{STORAGE_SCHEME}://{self.host}:{spec.client_port}"
        )
        try:
            self.start_etcd()
            self._wait_etcd(spec, self.etcd_tls()[1], timeout)
            self.start_apiserver(endpoint)
            self.apiserver.wait_ready(endpoint, timeout)
        except BaseException:
            self.stop()
            raise
        return endpoint

    def start_on(self, storage: EtcdStorage, port: int | None = None, timeout: float = 120.0) -> Endpoint:
        """kube-apiserver alone on `port` over `storage` (a store someone else runs: raftkube's
        members through their etcd API); returns once /readyz answers 200 as admin."""
        check_peers(("kube-apiserver",))
        self.creds.ensure(self.host)
        endpoint = Endpoint(self.host, port or free_ports(1, self.host)[0], f"{STORE_SCHEME}://{storage.servers[0]}")
        try:
            self.start_apiserver(endpoint, storage)
            self.apiserver.wait_ready(endpoint, timeout)
        except BaseException:
            self.apiserver.stop()
            raise
        return endpoint

    def _wait_etcd(self, spec: EtcdSpec, client: pki.CertFiles, timeout: float) -> None:
        ctx = pki.client_context(client.ca, client.cert, client.key)
        deadline = time.monotonic() + timeout
        last = "not tried"
        while time.monotonic() < deadline:
            if read_pid(self.etcd_pid_file) is None:
                raise LauncherError(f"etcd exited during startup; see {self.etcd_log}")
            conn = http.client.HTTPSConnection(spec.host, spec.client_port, timeout=2.0, context=ctx)
            try:
                conn.request("GET", "/health")
                response = conn.getresponse()
                last = response.read(200).decode("utf-8", "replace")
                if response.status == 200 and '"true"' in last:
                    return
            except (OSError, http.client.HTTPException) as e:
                last = str(e) or type(e).__name__
            finally:
                conn.close()
            time.sleep(0.1)
        raise LauncherError(f"etcd was not healthy within {timeout:.0f}s (last: {last}); see {self.etcd_log}")

    def stop(self, timeout: float = 15.0) -> list[str]:
        """kube-apiserver, then etcd, each by its process group (SIGKILL after `timeout`); the
        ones that were running."""
        stopped = []
        if self.apiserver.stop(timeout):
            stopped.append("kube-apiserver")
        if stop_process(self.etcd_pid_file, timeout):
            stopped.append("etcd")
        return stopped


__all__ = [
    "REQUIRED",
    "ApiserverSpec",
    "EtcdSpec",
    "PeerUnavailable",
    "UpstreamControlPlane",
    "check_peers",
    "etcd_argv",
    "kube_apiserver_argv",
]
