"""Kubeconfig loading: what kubectl accepts loads; what a component cannot use is refused by
name (file and field), never ignored."""

from __future__ import annotations

import base64
import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.client.kubeconfig import KubeconfigError, load

CA = b"-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def doc(user: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": cluster if cluster is not None else {"server": "https://127.0.0.1:6443"}}
        ],
        "users": [{"name": "u", "user": user if user is not None else {"token": "abc.def"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "team"}}],
        "current-context": "ctx",
        **top,
    }


def servers_ext(servers: Any) -> dict[str, Any]:
    """A cluster naming its apiservers in the `raftkube.io/apiservers` extension (after someone else's)."""
    return {
        "server": "https://127.0.0.1:6443",
        "extensions": [
            {"name": "example.com/other", "extension": {"anything": [1, 2]}},
            {"name": "raftkube.io/apiservers", "extension": {"servers": servers}},
        ],
    }


def write(path: Path, content: Any) -> Path:
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return path


def test_a_token_user_loads_with_its_namespace_and_server(tmp_path: Path) -> None:
    cfg = load(write(tmp_path / "k", doc()))
    assert cfg.server == "https://127.0.0.1:6443" and cfg.token == "abc.def"
    assert cfg.namespace == "team" and cfg.context == "ctx"
    assert cfg.headers() == {"Authorization": "Bearer abc.def"}


def test_the_apiservers_extension_lists_every_apiserver_to_dial(tmp_path: Path) -> None:
    listed = ["https://127.0.0.1:7001/", "https://127.0.0.1:7002", "https://127.0.0.1:7001"]
    cfg = load(write(tmp_path / "k", doc(cluster=servers_ext(listed))))
    assert cfg.server == "https://127.0.0.1:6443"  # what kubectl dials (the balancer)
    assert cfg.endpoints == ("https://127.0.0.1:7001", "https://127.0.0.1:7002")
    assert load(write(tmp_path / "k", doc())).endpoints == ("https://127.0.0.1:6443",)


def test_files_are_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_bytes(CA)
    (tmp_path / "token").write_text("tok-1\n")
    cfg = load(
        write(
            tmp_path / "k",
            doc(user={"tokenFile": "token"}, cluster={"server": "https://h:1", "certificate-authority": "ca.pem"}),
        )
    )
    assert cfg.ca_data == CA and cfg.token == "tok-1"


def test_inline_data_is_base64(tmp_path: Path) -> None:
    cfg = load(
        write(
            tmp_path / "k",
            doc(
                user={"client-certificate-data": b64(b"cert"), "client-key-data": b64(b"key")},
                cluster={"server": "https://h:1", "certificate-authority-data": b64(CA)},
            ),
        )
    )
    assert (cfg.cert_data, cfg.key_data, cfg.ca_data, cfg.token) == (b"cert", b"key", CA, None)


def test_kubeconfig_variable_merges_first_wins(tmp_path: Path) -> None:
    first = write(tmp_path / "a", {"current-context": "ctx", "users": [{"name": "u", "user": {"token": "first"}}]})
    second = write(tmp_path / "b", doc(user={"token": "second"}, **{"current-context": "other"}))
    cfg = load(environ={"KUBECONFIG": f"{first}:{tmp_path / 'missing'}:{second}"})
    assert cfg.token == "first" and cfg.context == "ctx"


def test_an_explicit_context_wins_over_the_current_one(tmp_path: Path) -> None:
    d = doc()
    d["contexts"].append({"name": "plain", "context": {"cluster": "c"}})
    cfg = load(write(tmp_path / "k", d), context="plain")
    assert cfg.token is None and cfg.namespace == "default"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{", "not YAML"),
        ("- a\n- b\n", "must be a mapping, got list"),
        (doc(**{"current-context": ""}), "no current-context"),
        (doc(**{"current-context": "nope"}), "context 'nope' is not defined"),
        (doc(cluster={"server": "ftp://h"}), "clusters[c].server: 'ftp://h' is not an http(s) URL"),
        (doc(cluster={}), "clusters[c].server: must be a non-empty string"),
        (doc(cluster={"server": "https://h", "insecure-skip-tls-verify": "yes"}), "must be true or false"),
        (doc(cluster={"server": "https://h", "certificate-authority-data": "%%%"}), "not valid base64"),
        (doc(cluster={"server": "https://h", "certificate-authority": "nope.pem"}), "certificate-authority: "),
        (doc(user={"exec": {"command": "aws"}}), "users[u].exec: exec credential plugins are not supported"),
        (doc(user={"auth-provider": {"name": "gcp"}}), "users[u].auth-provider: auth providers are not supported"),
        (doc(user={"username": "a", "password": "b"}), "basic authentication is not supported"),
        (doc(user={"token": "has space"}), "users[u].token: must be printable ASCII"),
        (doc(user={"token": 5}), "users[u].token: must be a non-empty string"),
        (doc(user={"client-certificate-data": b64(b"c")}), "users[u].client-key: a client certificate needs both"),
        (doc(cluster={"server": "https://h:99999"}), "clusters[c].server: 'https://h:99999' is not an http(s) URL"),
        (doc(cluster={"server": "https://[::1"}), "clusters[c].server: 'https://[::1' is not an http(s) URL"),
        (doc(cluster={"server": "https://h", "extensions": {}}), "clusters[c].extensions: must be a list"),
        (doc(cluster=servers_ext([])), "extensions[1].extension.servers: must be a list of 1 to 16 URLs"),
        (doc(cluster=servers_ext(["https://h"] * 17)), "extension.servers: must be a list of 1 to 16 URLs"),
        (doc(cluster=servers_ext(["https://a:1", 7])), "extension.servers: 7 is not an http(s) URL"),
        (doc(cluster=servers_ext(["unix:///s"])), "extension.servers: 'unix:///s' is not an http(s) URL"),
        ({"clusters": {"c": 1}, "current-context": "x"}, "clusters: must be a list"),
        ({"clusters": [{"cluster": {}}], "current-context": "x"}, "clusters[0].name: must be a non-empty string"),
    ],
)
def test_bad_kubeconfigs_are_refused_naming_the_field(tmp_path: Path, content: Any, says: str) -> None:
    path = write(tmp_path / "k", content)
    with pytest.raises(KubeconfigError) as e:
        load(path)
    assert says in str(e.value) and str(path) in str(e.value)


def test_a_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="no such file"):
        load(tmp_path / "absent")


def test_an_oversized_file_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "k"
    with big.open("wb") as f:
        f.truncate(16 * 1024 * 1024 + 1)
    with pytest.raises(KubeconfigError, match="larger than"):
        load(big)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_any_bytes_either_load_or_raise_a_kubeconfig_error(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "k"
    path.write_bytes(raw)
    with contextlib.suppress(KubeconfigError):
        load(path)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "clusters": json_values,
            "users": json_values,
            "contexts": json_values,
            "current-context": json_values,
        },
    )
)
def test_any_structure_either_loads_or_raises_a_kubeconfig_error(
    tmp_path_factory: pytest.TempPathFactory, content: dict[str, Any]
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "k"
    path.write_text(yaml.safe_dump(content))
    with contextlib.suppress(KubeconfigError):
        load(path)


@settings(max_examples=300, deadline=None)
@given(json_values, json_values)
def test_any_extensions_either_load_or_raise_a_kubeconfig_error(
    tmp_path_factory: pytest.TempPathFactory, extensions: Any, servers: Any
) -> None:
    """Hostile `extensions`, and hostile `servers` inside ours: loaded or refused, never a crash."""
    path = tmp_path_factory.mktemp("fuzz") / "k"
    cluster = servers_ext(servers)
    cluster["extensions"] = [*cluster["extensions"], extensions] if isinstance(extensions, dict) else extensions
    path.write_text(yaml.safe_dump(doc(cluster=cluster)))
    with contextlib.suppress(KubeconfigError):
        config = load(path)
        assert all(s.startswith(("https://", "http://")) for s in config.endpoints)
