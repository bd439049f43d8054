"""The upstream control plane's command lines and peer checks (bench.peers.upstream), without
running a peer: what etcd and kube-apiserver are told, and the error for a peer that is not
built or not the pinned version."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from apiserver.pki import ApiserverPKI
from bench.peers.upstream import (
    ApiserverSpec,
    EtcdSpec,
    PeerUnavailable,
    check_peers,
    etcd_argv,
    kube_apiserver_argv,
)
from machinery.process import peers, pki
from machinery.process.command import UsageError


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in argv[1:])


def test_etcd_listens_on_loopback_only_with_mutual_tls(tmp_path: Path) -> None:
    tls = pki.CertFiles(tmp_path / "s.crt", tmp_path / "s.key", tmp_path / "ca.crt")
    argv = etcd_argv(Path("/x/etcd"), EtcdSpec(tmp_path / "data", 2379, 2380, tls))
    f = _flags(argv)
    assert argv[0] == "/x/etcd"
    assert f["listen-client-urls"] == f["advertise-client-urls"] == "https://127.0.0.1:2379"
    assert f["listen-peer-urls"] == "http://127.0.0.1:2380"
    assert f["initial-cluster"] == "upstream=http://127.0.0.1:2380"
    assert f["data-dir"] == str(tmp_path / "data")
    assert f["cert-file"] == str(tls.cert) and f["trusted-ca-file"] == str(tls.ca)
    assert "client-cert-auth" in f


def test_plain_etcd_has_no_tls_flags(tmp_path: Path) -> None:
    f = _flags(etcd_argv(Path("etcd"), EtcdSpec(tmp_path, 1, 2, None)))
    assert f["listen-client-urls"] == "http://127.0.0.1:1"
    assert not {"cert-file", "client-cert-auth"} & f.keys()


def test_kube_apiserver_gets_our_credentials_node_rbac_and_node_restriction(tmp_path: Path) -> None:
    creds = ApiserverPKI.of(tmp_path)
    etcd = pki.CertFiles(tmp_path / "c.crt", tmp_path / "c.key", tmp_path / "ca.crt")
    kubelet = pki.CertFiles(tmp_path / "k.crt", tmp_path / "k.key", tmp_path / "ca.crt")
    spec = ApiserverSpec(6443, ("https://127.0.0.1:2379",), etcd, creds, kubelet)
    f = _flags(kube_apiserver_argv(Path("kube-apiserver"), spec))
    assert f["bind-address"] == f["advertise-address"] == "127.0.0.1"
    assert f["secure-port"] == "6443"
    assert f["authorization-mode"] == "Node,RBAC"
    assert "NodeRestriction" in f["enable-admission-plugins"].split(",")
    assert f["etcd-servers"] == "https://127.0.0.1:2379"
    assert (f["etcd-certfile"], f["etcd-keyfile"], f["etcd-cafile"]) == tuple(map(str, (etcd.cert, etcd.key, etcd.ca)))
    assert f["tls-cert-file"] == str(creds.serving.cert) and f["client-ca-file"] == str(creds.ca)
    assert f["token-auth-file"] == str(creds.tokens)
    assert f["service-account-signing-key-file"] == str(creds.service_account_key)
    assert f["service-account-key-file"] == str(creds.service_account_pub)
    assert f["kubelet-client-certificate"] == str(kubelet.cert) and f["kubelet-certificate-authority"] == str(creds.ca)
    assert f["cert-dir"].startswith(str(tmp_path))


def test_kube_apiserver_over_plain_etcd_has_no_etcd_tls(tmp_path: Path) -> None:
    kubelet = pki.CertFiles(tmp_path / "k.crt", tmp_path / "k.key", tmp_path / "ca.crt")
    spec = ApiserverSpec(1, ("http://127.0.0.1:1", "http://127.0.0.1:2"), None, ApiserverPKI.of(tmp_path), kubelet)
    f = _flags(kube_apiserver_argv(Path("kube-apiserver"), spec))
    assert f["etcd-servers"] == "http://127.0.0.1:1,http://127.0.0.1:2"
    assert not {"etcd-certfile", "etcd-keyfile", "etcd-cafile"} & f.keys()


def test_a_missing_peer_is_a_usage_error_naming_the_build_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(PeerUnavailable) as e:
        check_peers()
    assert isinstance(e.value, UsageError)  # `raftkube` exits 2 on it
    assert "raftkube peers build --only etcd,kube-apiserver" in str(e.value)
    assert "missing" in str(e.value)


def _fake_peer(name: str, answer: str, recorded_version: str) -> Path:
    path = peers.peer_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{answer}'\n")
    path.chmod(0o755)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    entry = {"peer": name, "version": recorded_version, "source": "x", "sha256": sha, "built_at": "",
             "build_seconds": 0.0, "go": "go", "reports": answer}  # fmt: skip
    (path.parent / "manifest.json").write_text(json.dumps({"peers": {name: entry}}))
    return path


def test_a_peer_answering_another_version_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _fake_peer("kube-apiserver", "Kubernetes v1.32.0", peers.KUBERNETES_VERSION)
    with pytest.raises(PeerUnavailable) as e:
        check_peers(("kube-apiserver",))
    assert "not v1.33" in str(e.value) and "--only kube-apiserver`" in str(e.value)


def test_a_peer_recorded_at_another_version_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _fake_peer("etcd", f"etcd Version: {peers.ETCD_VERSION[1:]}", "v3.6.0")
    with pytest.raises(PeerUnavailable, match=r"corrupt.*--only etcd`"):
        check_peers(("etcd",))


def test_a_peer_built_at_its_pinned_version_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = _fake_peer("etcd", f"etcd Version: {peers.ETCD_VERSION[1:]}", peers.ETCD_VERSION)
    assert check_peers(("etcd",)) == {"etcd": path}
