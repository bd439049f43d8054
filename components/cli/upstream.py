"""`raftkube up --upstream scheduler,controller-manager`: the upstream kube-scheduler and
kube-controller-manager (the built peers, machinery.process.peers) in place of ours, against
our apiserver: a mixed control plane, the first yardstick of issue 24 section 4.

Each runs as ours does (components.cli.launcher): its own process group under
`<data_dir>/<part>/pid`, its output in `<data_dir>/<part>/<part>.log`, the kubeconfig of its
own identity (`system:kube-scheduler`, `system:kube-controller-manager`: the client
certificates apiserver.pki issues from the cluster CA, as for ours), leader election on.
What differs is how they serve: kube's components serve /healthz over HTTPS on
`--secure-port`, so each gets a free loopback port and a serving certificate from our CA,
and `status` probes it verifying that CA (`health.json` records port and scheme).

Choices where kube leaves one open:

* **No delegated authentication or authorization** of their own port.  Without
  `--authentication-kubeconfig`/`--authorization-kubeconfig` they ask our apiserver nothing
  (no TokenReview, no SubjectAccessReview, no extension-apiserver-authentication lookup):
  anonymous requests reach only the always-allowed paths (/healthz, /readyz, /livez), which
  is all `status` needs.  Delegation is what a later step tests, not what a mixed control
  plane needs.
* **`--use-service-account-credentials=false`** (kube's own default; kubeadm sets true).
  With true every controller authenticates as its own service account in kube-system,
  through TokenRequest, and needs kube's ~30 `system:controller:*` ClusterRoles, which our
  bootstrap policy does not carry yet: our controller-manager runs every controller under the
  one identity `system:kube-controller-manager`, whose role covers them.  The token
  machinery still runs: `--service-account-private-key-file` (our sa.key) feeds the
  service-account-token controller, `--root-ca-file` the kube-root-ca.crt publisher.
* **`--controllers=*` without the cloud ones** (no cloud provider here), and the CSR
  signers on our cluster CA (`--cluster-signing-cert-file`/`-key-file`), as kubeadm does.

`up` records which parts run upstream (`<data_dir>/<part>/upstream.json`), so `status`,
`down`, `restart` and the supervisor treat each as it was started.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass
from pathlib import Path

from apiserver.pki import CONTROLLER_MANAGER, SCHEDULER, ApiserverPKI
from components.cli.launcher import HEALTH_FILE, PID_FILE, LocalComponent, get_healthz
from machinery.process import disk, pki
from machinery.process.command import UsageError
from machinery.process.launch import LauncherError, free_ports, spawn
from machinery.process.peers import KUBERNETES_VERSION, peer_path

BINARIES = {SCHEDULER: "kube-scheduler", CONTROLLER_MANAGER: "kube-controller-manager"}
"""Our part's name -> the upstream peer that takes its place."""

CLOUD_CONTROLLERS = ("cloud-node-lifecycle-controller", "node-route-controller", "service-lb-controller")
"""kube-controller-manager's controllers that need a cloud provider (there is none)."""

CONTROLLERS = ",".join(("*", *(f"-{c}" for c in CLOUD_CONTROLLERS)))
MARKER = "upstream.json"
BIND_ADDRESS = "127.0.0.1"


def parse(spec: str) -> tuple[str, ...]:
    """`--upstream`'s value: a comma-separated subset of scheduler, controller-manager.
    UsageError names an unknown or missing part."""
    names = tuple(dict.fromkeys(s.strip() for s in spec.split(",") if s.strip()))
    if not names:
        raise UsageError(f"--upstream needs at least one of {', '.join(BINARIES)}")
    unknown = [n for n in names if n not in BINARIES]
    if unknown:
        raise UsageError(f"--upstream: unknown part {unknown[0]!r} (known: {', '.join(BINARIES)})")
    return names


def build_command(parts: tuple[str, ...]) -> str:
    return f"raftkube peers build --only {','.join(BINARIES[p] for p in parts)}"


def require_binaries(parts: tuple[str, ...]) -> dict[str, Path]:
    """Each part's built binary; UsageError (exit 2) naming the command that builds what is missing."""
    paths = {p: peer_path(BINARIES[p]) for p in parts}
    missing = tuple(p for p, path in paths.items() if not path.is_file())
    if missing:
        where = ", ".join(str(paths[p]) for p in missing)
        raise UsageError(
            f"--upstream needs the upstream {' and '.join(BINARIES[p] for p in missing)} {KUBERNETES_VERSION},"
            f" not built ({where}): run `{build_command(missing)}`"
        )
    return paths


@dataclass(frozen=True, slots=True)
class Serving:
    """What an upstream component serves /healthz with: a loopback port and a certificate."""

    port: int
    cert: Path
    key: Path


def scheduler_flags(kubeconfig: Path, serving: Serving) -> list[str]:
    """kube-scheduler's command line (flags, not a KubeSchedulerConfiguration: the two it
    needs, --kubeconfig and --leader-elect, are still honoured as flags in 1.33)."""
    return [
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=true",
        *_serving_flags(serving),
    ]


def controller_manager_flags(kubeconfig: Path, serving: Serving, creds: ApiserverPKI) -> list[str]:
    """kube-controller-manager's command line (see the module's docstring for the choices)."""
    ca = creds.ca
    return [
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=true",
        *_serving_flags(serving),
        f"--controllers={CONTROLLERS}",
        "--use-service-account-credentials=false",
        f"--service-account-private-key-file={creds.service_account_key}",
        f"--root-ca-file={ca}",
        f"--cluster-signing-cert-file={ca}",
        f"--cluster-signing-key-file={ca.parent / pki.CA_KEY}",
        "--cluster-name=raftkube",
    ]


def _serving_flags(serving: Serving) -> list[str]:
    return [
        f"--bind-address={BIND_ADDRESS}",
        f"--secure-port={serving.port}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
    ]


def choose(data_dir: Path, upstream: tuple[str, ...]) -> None:
    """Record which parts run upstream from now on (and that the others run ours)."""
    for name, binary in BINARIES.items():
        marker = Path(data_dir) / name / MARKER
        if name in upstream:
            disk.make_dirs(marker.parent)
            doc = {"binary": str(peer_path(binary)), "version": KUBERNETES_VERSION}
            disk.write_private(marker, (json.dumps(doc) + "\n").encode())
        else:
            marker.unlink(missing_ok=True)


def component(data_dir: Path, name: str, extra_args: tuple[str, ...] | None = None) -> LocalComponent:
    """The part `name` as `up` last chose it: upstream's when recorded so, else ours."""
    if name in BINARIES and (Path(data_dir) / name / MARKER).is_file():
        return UpstreamComponent(data_dir, name)
    return LocalComponent(data_dir, name, extra_args)


class UpstreamComponent(LocalComponent):
    """kube-scheduler or kube-controller-manager in the place of ours, with ours' pid and log files."""

    def __init__(self, data_dir: Path, name: str) -> None:
        if name not in BINARIES:
            raise ValueError(f"no upstream component {name!r} (known: {', '.join(BINARIES)})")
        super().__init__(data_dir, name)

    @property
    def binary(self) -> Path:
        return peer_path(BINARIES[self.name])

    def start(self) -> int:
        if (pid := self.pid()) is not None:
            raise LauncherError(f"the {self.name} is already running (pid {pid})")
        if not self.binary.is_file():
            raise LauncherError(f"{self.binary} is not built: run `{build_command((self.name,))}`")
        if not self.kubeconfig.exists():
            raise LauncherError(f"{self.name}: no kubeconfig at {self.kubeconfig} (`raftkube up` writes it)")
        creds = ApiserverPKI.of(self.data_dir)
        files = _serving_cert(creds, BINARIES[self.name])
        serving = Serving(free_ports(1, BIND_ADDRESS)[0], files.cert, files.key)
        disk.make_dirs(self.root)
        doc = {"port": serving.port, "scheme": "https"}
        disk.write_private(self.root / HEALTH_FILE, (json.dumps(doc) + "\n").encode())
        if self.name == SCHEDULER:
            flags = scheduler_flags(self.kubeconfig, serving)
        else:
            flags = controller_manager_flags(self.kubeconfig, serving, creds)
        return spawn([str(self.binary), *flags], self.log_file, self.root / PID_FILE)

    def probe(self, timeout: float = 2.0) -> tuple[int, str]:
        """GET https://127.0.0.1:<secure-port>/healthz, its certificate checked against our CA."""
        port = self.health_port()
        if port is None:
            return 0, "no health port recorded"
        try:
            context = pki.client_context(ApiserverPKI.of(self.data_dir).ca)
        except (pki.PKIError, OSError, ssl.SSLError) as e:
            return 0, str(e)
        return get_healthz(f"{self.url}/healthz", timeout, context)

    @property
    def url(self) -> str:
        port = self.health_port()
        return f"https://{BIND_ADDRESS}:{port}" if port else "-"


def _serving_cert(creds: ApiserverPKI, stem: str) -> pki.CertFiles:
    """`<stem>-serving.crt` for 127.0.0.1 and localhost, issued by our CA when missing or expired."""
    name = f"{stem}-serving"
    try:
        return pki.load_files(creds.pki_dir, name)
    except pki.PKIError:
        ca = pki.load_files(creds.pki_dir, "ca")
        return pki.issue_cert(ca, creds.pki_dir, name, common_name=stem, hosts=("127.0.0.1", "localhost"), server=True)
