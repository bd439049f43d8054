"""The credentials `raftkube up` makes for each part of the cluster (without starting it): the
service-account signing key, each component's client certificate and kubeconfig, and the
`--service-account-*` flags of `raftkube apiserver`."""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from apiserver.auth import jws
from apiserver.auth.serviceaccount_tokens import DEFAULT_ISSUER
from apiserver.endpoint import Endpoint
from apiserver.main import add_arguments, options, parse_go_duration
from apiserver.pki import (
    DEFAULT_NODES,
    ApiserverPKI,
    component_identity,
    component_kubeconfig,
    write_component_kubeconfigs,
)
from machinery.process.command import UsageError
from machinery.process.launch import free_ports
from tests.support.modes import mode

SERVER = "https://127.0.0.1:6443"


def _subject(kubeconfig: Path) -> tuple[str, list[str]]:
    doc = yaml.safe_load(kubeconfig.read_text())
    cert = x509.load_pem_x509_certificate(base64.b64decode(doc["users"][0]["user"]["client-certificate-data"]))
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    return str(cn), [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def test_the_signing_key_is_made_once_and_private(tmp_path: Path) -> None:
    creds = ApiserverPKI.of(tmp_path)
    creds.ensure()
    key = jws.load_signing_key(creds.service_account_key)
    assert key.alg == "RS256" and key.key.key_size == 2048
    assert mode(creds.service_account_key) == 0o600
    assert [k.kid for k in jws.load_verify_keys(creds.service_account_pub)] == [key.kid]
    before = creds.service_account_key.read_bytes()
    creds.ensure()
    assert creds.service_account_key.read_bytes() == before


@pytest.mark.parametrize(
    ("component", "user", "groups"),
    [
        ("scheduler", "system:kube-scheduler", []),
        ("controller-manager", "system:kube-controller-manager", []),
        ("kubelet:node-1", "system:node:node-1", ["system:nodes"]),
        ("kubelet:worker.example", "system:node:worker.example", ["system:nodes"]),
        ("admin", "admin", ["system:masters"]),
    ],
)
def test_each_component_has_its_own_identity(tmp_path: Path, component: str, user: str, groups: list[str]) -> None:
    path = component_kubeconfig(tmp_path, component, server=SERVER)
    assert mode(path) == 0o600
    assert _subject(path) == (user, groups)
    doc = yaml.safe_load(path.read_text())
    assert doc["clusters"][0]["cluster"]["server"] == SERVER
    assert doc["users"][0]["name"] == user and doc["current-context"] == "raftkube"
    ca = base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"])
    assert ca == ApiserverPKI.of(tmp_path).ca.read_bytes()


def test_certificates_are_kept_and_the_server_follows_the_record(tmp_path: Path) -> None:
    first = component_kubeconfig(tmp_path, "scheduler", server=SERVER)
    cert = yaml.safe_load(first.read_text())["users"][0]["user"]["client-certificate-data"]
    creds = ApiserverPKI.of(tmp_path)
    (creds.root / "apiserver.json").write_text(json.dumps({"host": "127.0.0.1", "port": 7443}))
    again = component_kubeconfig(tmp_path, "scheduler")
    doc = yaml.safe_load(again.read_text())
    assert doc["users"][0]["user"]["client-certificate-data"] == cert
    assert doc["clusters"][0]["cluster"]["server"] == Endpoint("127.0.0.1", 7443).url


def test_up_writes_every_component(tmp_path: Path) -> None:
    paths = write_component_kubeconfigs(tmp_path, SERVER)
    assert [p.name for p in paths] == [
        "admin.kubeconfig",
        "scheduler.kubeconfig",
        "controller-manager.kubeconfig",
        "hollow-nodes.kubeconfig",
        "kube-proxy.kubeconfig",
        "cluster-dns.kubeconfig",
        *(f"kubelet-{n}.kubeconfig" for n in DEFAULT_NODES),
    ]
    # distinct keys: no component can pass for another
    keys = {yaml.safe_load(p.read_text())["users"][0]["user"]["client-key-data"] for p in paths}
    assert len(keys) == len(paths)


def test_bad_component_names(tmp_path: Path) -> None:
    for bad in ("kubelet:", "kubelet:Node_1", "kubelet:" + "n" * 57, "proxy"):
        with pytest.raises(ValueError, match=r"node name|unknown component"):
            component_identity(bad)
    with pytest.raises(ValueError, match="no apiserver recorded"):
        component_kubeconfig(tmp_path, "scheduler")


# ---------------------------------------------------------------- flags
def _args(tmp_path: Path, *flags: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    port = str(free_ports(1)[0])
    return p.parse_args(["--data-dir", str(tmp_path / "rk"), "--port", port, "--storage", "etcd://127.0.0.1:1", *flags])


def test_service_account_flags(tmp_path: Path) -> None:
    defaults = options(_args(tmp_path)).service_accounts
    assert defaults is not None
    assert defaults.issuers == (DEFAULT_ISSUER,) and defaults.api_audiences == (DEFAULT_ISSUER,)
    generated = jws.load_signing_key(ApiserverPKI.of(tmp_path / "rk").service_account_key)
    assert defaults.signing_key.kid == generated.kid and defaults.max_expiration_seconds is None
    other = tmp_path / "old.pub"
    old = jws.signing_key(jws.load_signing_key(_write_key(tmp_path / "old.key")).key)
    other.write_bytes(jws.public_pem(old.key.public_key()))
    s = options(
        _args(
            tmp_path,
            "--service-account-issuer=https://new",
            "--service-account-issuer=https://old",
            "--api-audiences=api, vault",
            "--service-account-key-file",
            str(other),
            "--service-account-max-token-expiration=24h",
            "--service-account-extend-token-expiration=false",
        )
    ).service_accounts
    assert s is not None
    assert s.issuers == ("https://new", "https://old") and s.api_audiences == ("api", "vault")
    assert [k.kid for k in s.keys] == [generated.kid, old.kid]
    assert s.max_expiration_seconds == 86400 and s.extend_expiration is False


def _write_key(path: Path) -> Path:
    path.write_bytes(jws.generate_rsa_pem())
    return path


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--service-account-signing-key-file", "/nonexistent/sa.key"], "--service-account-signing-key-file:"),
        (["--service-account-key-file", "/nonexistent/sa.pub"], "--service-account-key-file: /nonexistent/sa.pub"),
        (["--service-account-issuer", " "], "--service-account-issuer: must not be empty"),
        (["--service-account-max-token-expiration", "1d"], "--service-account-max-token-expiration: '1d' is not"),
        (["--service-account-max-token-expiration", "30m"], "--service-account-max-token-expiration: must be between"),
    ],
)
def test_bad_service_account_flags_name_the_flag(tmp_path: Path, flags: list[str], message: str) -> None:
    with pytest.raises(UsageError) as raised:
        options(_args(tmp_path, *flags))
    assert str(raised.value).startswith(message)


def test_go_durations() -> None:
    assert parse_go_duration("1h30m") == 5400 and parse_go_duration("3600s") == 3600
    # kube's duration flags are Go's time.ParseDuration: fractions and signs parse (the range
    # check refuses a negative expiration), whole seconds are kept
    assert parse_go_duration("1.5h") == 5400 and parse_go_duration("-1h") == -3600
    assert parse_go_duration("3600.9s") == 3600
    for bad in ("", "1d", "h", "1h 2m", "1", ".h"):
        assert parse_go_duration(bad) is None
