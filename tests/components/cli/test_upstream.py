"""`raftkube up --upstream`'s pure parts (components.cli.upstream): the parts it takes, the
error when a peer is not built, the command lines and kubeconfigs it hands kube-scheduler and
kube-controller-manager, and which part `status`/`restart` see.  The mixed cluster itself
runs in test_upstream_mixed.py (`peers` marker)."""

from __future__ import annotations

import base64
import os
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from apiserver.pki import ApiserverPKI, component_kubeconfig
from components.cli import upstream
from components.cli.launcher import LocalComponent
from components.cli.upstream import Serving, UpstreamComponent
from machinery.process import disk, pki
from machinery.process.command import UsageError
from machinery.process.launch import LauncherError, free_ports
from machinery.process.peers import peer_path
from tests.support.cli import raftkube

SERVING = Serving(10259, Path("/pki/kube-scheduler-serving.crt"), Path("/pki/kube-scheduler-serving.key"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty peers cache: nothing is built."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_parse_takes_either_or_both_parts() -> None:
    assert upstream.parse("scheduler") == ("scheduler",)
    assert upstream.parse(" controller-manager , scheduler,scheduler") == ("controller-manager", "scheduler")


@pytest.mark.parametrize(("spec", "says"), [("", "at least one"), ("apiserver", "'apiserver'"), ("sched", "known")])
def test_parse_refuses_what_it_cannot_run(spec: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        upstream.parse(spec)


def test_a_missing_peer_names_the_build_command(cache: Path) -> None:
    with pytest.raises(UsageError) as e:
        upstream.require_binaries(("scheduler", "controller-manager"))
    assert "raftkube peers build --only kube-scheduler,kube-controller-manager" in str(e.value)
    built = peer_path("kube-scheduler")
    disk.make_dirs(built.parent)
    built.write_bytes(b"")
    with pytest.raises(UsageError, match=r"`raftkube peers build --only kube-controller-manager`"):
        upstream.require_binaries(("scheduler", "controller-manager"))
    assert upstream.require_binaries(("scheduler",)) == {"scheduler": built}


def test_up_with_a_missing_peer_exits_2_before_starting_anything(tmp_path: Path, cache: Path) -> None:
    data_dir = tmp_path / "rk"
    proc = raftkube(
        "up", "--free-ports", "--data-dir", str(data_dir), "--upstream", "scheduler,controller-manager",
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr + proc.stdout
    assert "raftkube peers build --only kube-scheduler,kube-controller-manager" in proc.stderr
    assert not (data_dir / "store").exists()  # no member was started


def test_upstream_parts_and_the_upstream_apiserver_are_refused_together(tmp_path: Path) -> None:
    data_dir = tmp_path / "rk"
    proc = raftkube(
        "up", "--free-ports", "--data-dir", str(data_dir), "--upstream", "scheduler", "--apiserver", "upstream"
    )
    assert proc.returncode == 2, proc.stderr + proc.stdout
    assert "cannot go with --apiserver upstream" in proc.stderr
    assert not data_dir.exists() or not any(data_dir.iterdir())  # nothing was started


def _flag_map(flags: list[str]) -> dict[str, str]:
    assert all(f.startswith("--") and "=" in f for f in flags), flags
    pairs = [f[2:].split("=", 1) for f in flags]
    assert len({k for k, _ in pairs}) == len(pairs), f"a flag given twice: {flags}"
    return dict(pairs)


def test_scheduler_flags() -> None:
    flags = _flag_map(upstream.scheduler_flags(Path("/k/kube-scheduler.kubeconfig"), SERVING))
    assert flags == {
        "kubeconfig": "/k/kube-scheduler.kubeconfig",
        "leader-elect": "true",
        "bind-address": "127.0.0.1",
        "secure-port": "10259",
        "tls-cert-file": "/pki/kube-scheduler-serving.crt",
        "tls-private-key-file": "/pki/kube-scheduler-serving.key",
    }


def test_controller_manager_flags(tmp_path: Path) -> None:
    creds = ApiserverPKI.of(tmp_path)
    flags = _flag_map(upstream.controller_manager_flags(Path("/k/kcm.kubeconfig"), SERVING, creds))
    pki_dir = tmp_path / "apiserver" / "pki"
    assert flags["kubeconfig"] == "/k/kcm.kubeconfig"
    assert flags["leader-elect"] == "true"
    assert (flags["bind-address"], flags["secure-port"]) == ("127.0.0.1", "10259")
    assert flags["use-service-account-credentials"] == "false"
    assert flags["service-account-private-key-file"] == str(pki_dir / "sa.key")
    assert flags["root-ca-file"] == str(pki_dir / "ca.crt")
    assert flags["cluster-signing-cert-file"] == str(pki_dir / "ca.crt")
    assert flags["cluster-signing-key-file"] == str(pki_dir / "ca.key")
    controllers = flags["controllers"].split(",")
    assert controllers[0] == "*"
    assert {"-service-lb-controller", "-node-route-controller", "-cloud-node-lifecycle-controller"} <= set(controllers)
    # no delegation to our apiserver (TokenReview/SubjectAccessReview) for their own port
    assert not {"authentication-kubeconfig", "authorization-kubeconfig"} & set(flags)


@pytest.mark.parametrize(
    ("part", "user"),
    [("scheduler", "system:kube-scheduler"), ("controller-manager", "system:kube-controller-manager")],
)
def test_each_upstream_part_has_kubes_identity(tmp_path: Path, part: str, user: str) -> None:
    """The kubeconfig an upstream part runs with carries the client certificate of kube's user
    for it (the one the bootstrap RBAC binds), issued by the cluster CA."""
    written = component_kubeconfig(tmp_path, part, server="https://127.0.0.1:6443")
    assert UpstreamComponent(tmp_path, part).kubeconfig == written
    doc = yaml.safe_load(written.read_text())
    assert doc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert doc["users"][0]["name"] == user
    cert = x509.load_pem_x509_certificate(base64.b64decode(doc["users"][0]["user"]["client-certificate-data"]))
    assert cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == user
    ca = x509.load_pem_x509_certificate(ApiserverPKI.of(tmp_path).ca.read_bytes())
    assert cert.issuer == ca.subject


def test_the_recorded_choice_decides_which_part_status_and_restart_see(tmp_path: Path, cache: Path) -> None:
    upstream.choose(tmp_path, ("scheduler",))
    assert type(upstream.component(tmp_path, "scheduler")) is UpstreamComponent
    assert type(upstream.component(tmp_path, "controller-manager")) is LocalComponent
    assert type(upstream.component(tmp_path, "hollow-nodes")) is LocalComponent
    upstream.choose(tmp_path, ())  # a later plain `up`: ours again
    assert type(upstream.component(tmp_path, "scheduler")) is LocalComponent


def test_start_without_the_binary_names_the_build_command(tmp_path: Path, cache: Path) -> None:
    with pytest.raises(LauncherError, match="raftkube peers build --only kube-controller-manager"):
        UpstreamComponent(tmp_path, "controller-manager").start()


@pytest.fixture
def https_healthz(tmp_path: Path) -> Iterator[int]:
    """A /healthz over HTTPS with the serving certificate an upstream part gets from our CA."""
    ApiserverPKI.of(tmp_path).ensure()
    files = upstream._serving_cert(ApiserverPKI.of(tmp_path), "kube-scheduler")

    class Healthz(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"ok" if self.path == "/healthz" else b"no"
            self.send_response(200 if self.path == "/healthz" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    port = free_ports(1)[0]
    server = HTTPServer(("127.0.0.1", port), Healthz)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.cert, files.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_status_probes_the_secure_port_verifying_our_ca(tmp_path: Path, https_healthz: int) -> None:
    part = UpstreamComponent(tmp_path, "scheduler")
    disk.make_dirs(part.root)
    disk.write_private(part.root / "health.json", f'{{"port": {https_healthz}, "scheme": "https"}}\n'.encode())
    assert part.url == f"https://127.0.0.1:{https_healthz}"
    assert part.probe(timeout=5) == (200, "ok")
    # another CA: the probe does not trust the server
    pki.create_ca(tmp_path / "other", "another CA")
    (tmp_path / "apiserver" / "pki" / "ca.crt").write_bytes((tmp_path / "other" / "ca.crt").read_bytes())
    code, reason = part.probe(timeout=5)
    assert code == 0 and "CERTIFICATE_VERIFY_FAILED" in reason, reason
