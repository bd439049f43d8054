"""The apiserver's credentials made on first start, and the [apiserver] section of cluster.toml."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.config import ApiserverSettings, load_apiserver_settings, parse_storage_url
from apiserver.launcher import service_ip_of
from apiserver.pki import IN_CLUSTER_NAMES, ApiserverPKI, serving_hosts
from machinery.process.config import ConfigError
from tests.support.modes import mode, not_private, umask
from tests.support.paths import ROOT


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_first_start_creates_private_credentials_and_keeps_them(tmp_path: Path) -> None:
    creds = ApiserverPKI.of(tmp_path / "rk")
    with umask(0):
        creds.ensure()
    assert not_private(creds.root) == []
    assert mode(creds.tokens) == 0o600 and mode(creds.admin.key) == 0o600
    admin = _cert(creds.admin.cert)
    assert admin.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert [a.value for a in admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["system:masters"]
    usages = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    serving = _cert(creds.serving.cert)
    san = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    # and the kubernetes Service's in-cluster names: pods dial the API by them (kube's apiserver.crt)
    assert san.get_values_for_type(x509.DNSName) == ["localhost", *IN_CLUSTER_NAMES]
    token = creds.admin_token()
    assert token is not None and len(token) >= 40
    before = {p: p.read_bytes() for p in creds.root.rglob("*") if p.is_file()}
    creds.ensure()
    assert {p: p.read_bytes() for p in creds.root.rglob("*") if p.is_file()} == before


def test_a_new_host_reissues_only_the_serving_certificate(tmp_path: Path) -> None:
    creds = ApiserverPKI.of(tmp_path)
    creds.ensure()
    ca, admin = creds.ca.read_bytes(), creds.admin.cert.read_bytes()
    creds.ensure("10.1.2.3")
    san = _cert(creds.serving.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "10.1.2.3" in [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    assert creds.ca.read_bytes() == ca and creds.admin.cert.read_bytes() == admin


def test_serving_hosts() -> None:
    assert serving_hosts("127.0.0.1") == ("127.0.0.1", "localhost")
    assert serving_hosts("0.0.0.0") == ("127.0.0.1", "localhost")
    assert serving_hosts("[::1]") == ("127.0.0.1", "localhost", "::1")
    assert serving_hosts("api.example") == ("127.0.0.1", "localhost", "api.example")


def test_apiserver_section(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[apiserver]\nport = 7443\nstorage = "etcd://127.0.0.1:2379,127.0.0.1:22379"\n')
    assert load_apiserver_settings(f) == ApiserverSettings(port=7443, storage="etcd://127.0.0.1:2379,127.0.0.1:22379")
    f.write_text("[store]\nmembers = 1\n")
    assert load_apiserver_settings(f) == ApiserverSettings()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[apiserver]\nport = 70000\n", "apiserver.port must be at most 65535"),
        ('[apiserver]\nport = "6443"\n', "apiserver.port must be an integer"),
        ("[apiserver]\nhots = 1\n", "apiserver has unknown keys: hots"),
        (
            '[apiserver]\nstorage = "http://x:1"\n',
            "apiserver.storage: storage URL scheme 'http' is not one of raftkube, etcd",
        ),
        ('[apiserver]\nstorage = "etcd://"\n', "names no endpoint"),
        ('[apiserver]\nstorage = "etcd://host"\n', "not a host:port address"),
        ("apiserver = 3\n", "[apiserver] must be a table"),
        ("[apiserver\n", "not valid TOML"),
    ],
)
def test_bad_apiserver_section_names_file_and_key(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(body)
    with pytest.raises(ConfigError) as e:
        load_apiserver_settings(f)
    assert str(e.value).startswith(str(f)) and message in str(e.value)


def test_storage_urls() -> None:
    assert parse_storage_url("raftkube://127.0.0.1:2379, 127.0.0.1:12379") == (
        "raftkube",
        ["127.0.0.1:2379", "127.0.0.1:12379"],
    )


def test_the_repository_cluster_toml_has_the_defaults() -> None:
    assert load_apiserver_settings(ROOT / "cluster.toml") == ApiserverSettings()


def test_an_apiserver_started_by_up_names_its_service_cluster_ip(tmp_path: Path) -> None:
    """In-cluster clients on the pod network dial KUBERNETES_SERVICE_HOST, the ClusterIP (the
    conformance Aggregator spec's sample-apiserver failed on `certificate is valid for
    127.0.0.1, 192.0.2.2, not 10.96.0.1`): the launcher's certificate names it, from the flags."""
    assert service_ip_of(()) == "10.96.0.1"
    assert service_ip_of(("--service-cluster-ip-range", "10.100.0.0/16", "--x", "1")) == "10.100.0.1"
    assert service_ip_of(("--service-cluster-ip-range", "nonsense")) == "10.96.0.1"
    creds = ApiserverPKI.of(tmp_path)
    creds.ensure("127.0.0.1", (service_ip_of(()),))
    san = _cert(creds.serving.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "10.96.0.1" in [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
