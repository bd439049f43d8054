"""Volume files from configMap, secret, downwardAPI and projected volumes, the paths and modes
refused at the edge, and the atomic switch from one set of files to the next on a real disk."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet.envvars import Sources
from components.kubelet.volumes import VolumeError, check_path, files_of, write_atomically
from machinery.objects import Obj

POD: Obj = {
    "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web", "tier": 'f"e'}},
    "spec": {"containers": [{"name": "app", "resources": {"limits": {"memory": "64Mi"}}}]},
}
CONFIG_MAPS = {
    ("shop", "site"): {"data": {"index.html": "<h1>hi</h1>", "robots.txt": "no"}, "binaryData": {"logo": "AAE="}}
}
SECRETS = {("shop", "tls"): {"data": {"tls.key": base64.b64encode(b"KEY").decode()}}}
SOURCES = Sources(
    lambda ns, n: CONFIG_MAPS.get((ns, n)),
    lambda ns, n: SECRETS.get((ns, n)),
    lambda audience, seconds: "TOKEN" if (audience, seconds) == ("", 3600) else None,
)


def files(volume: Obj) -> Any:
    return files_of(volume, POD, SOURCES, "spec.volumes[0]")


def test_config_map_every_key_or_the_listed_items() -> None:
    assert files({"configMap": {"name": "site"}}) == {
        "index.html": (b"<h1>hi</h1>", 0o644),
        "robots.txt": (b"no", 0o644),
        "logo": (b"\x00\x01", 0o644),
    }
    picked = {
        "configMap": {
            "name": "site",
            "defaultMode": 0o600,
            "items": [
                {"key": "index.html", "path": "www/index.html"},
                {"key": "robots.txt", "path": "robots.txt", "mode": 0o400},
            ],
        }
    }
    assert files(picked) == {"www/index.html": (b"<h1>hi</h1>", 0o600), "robots.txt": (b"no", 0o400)}


def test_secret_decoded_and_missing_sources() -> None:
    assert files({"secret": {"secretName": "tls"}}) == {"tls.key": (b"KEY", 0o644)}
    assert files({"secret": {"secretName": "absent", "optional": True}}) == {}
    with pytest.raises(VolumeError, match='secret "absent" not found'):
        files({"secret": {"secretName": "absent"}})
    with pytest.raises(VolumeError, match=r"items\[0\].key: couldn't find key nope in ConfigMap shop/site"):
        files({"configMap": {"name": "site", "items": [{"key": "nope", "path": "x"}]}})


def test_downward_api_and_projected_and_empty_dir() -> None:
    down = {
        "downwardAPI": {
            "items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {
                    "path": "mem",
                    "resourceFieldRef": {"containerName": "app", "resource": "limits.memory", "divisor": "1Mi"},
                },
            ]
        }
    }
    assert files(down) == {
        "labels": (b'app="web"\ntier="f\\"e"', 0o644),
        "name": (b"web-1", 0o644),
        "mem": (b"64", 0o644),
    }
    projected = {
        "projected": {
            "defaultMode": 0o440,
            "sources": [
                {"configMap": {"name": "site", "items": [{"key": "robots.txt", "path": "robots.txt"}]}},
                {"secret": {"name": "tls"}},
                {"serviceAccountToken": {"path": "token"}},
            ],
        }
    }
    assert files(projected) == {"robots.txt": (b"no", 0o440), "tls.key": (b"KEY", 0o440), "token": (b"TOKEN", 0o440)}
    assert files({"emptyDir": {}}) is None


@pytest.mark.parametrize(
    ("volume", "says"),
    [
        (
            {"configMap": {"name": "site", "items": [{"key": "robots.txt", "path": "../etc/passwd"}]}},
            r"items\[0\].path: must not contain '.', '..'",
        ),
        (
            {"configMap": {"name": "site", "items": [{"key": "robots.txt", "path": "/etc/passwd"}]}},
            r"items\[0\].path: must be a relative path",
        ),
        (
            {"configMap": {"name": "site", "defaultMode": 0o1777}},
            r"configMap.defaultMode: must be an integer from 0 to 0777",
        ),
        ({"configMap": {"name": "site", "items": "all"}}, r"configMap.items: must be a list"),
        ({"hostPath": {"path": "/"}}, r"spec.volumes\[0\]: unsupported volume type"),
        ({"downwardAPI": {"items": [{"path": "x"}]}}, r"items\[0\]: needs a fieldRef or a resourceFieldRef"),
    ],
)
def test_bad_volumes_are_refused_naming_the_field(volume: Obj, says: str) -> None:
    with pytest.raises(VolumeError, match=says):
        files(volume)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab./", max_size=12))
def test_an_accepted_path_never_leaves_the_volume(path: str) -> None:
    try:
        checked = check_path(path, "p")
    except VolumeError:
        return
    resolved = os.path.normpath(os.path.join("/vol", checked))
    assert resolved.startswith("/vol/") and ".." not in checked.split("/")


def test_write_atomically_switches_every_file_at_once(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    write_atomically(target, {"a.txt": (b"one", 0o644), "dir/b.txt": (b"two", 0o600)})
    assert (target / "a.txt").read_bytes() == b"one" and (target / "dir" / "b.txt").read_bytes() == b"two"
    assert (target / "a.txt").is_symlink() and os.readlink(target / "a.txt") == "..data/a.txt"
    assert ((target / "dir" / "b.txt").stat().st_mode & 0o777) == 0o600
    first = os.readlink(target / "..data")
    held = open(target / "a.txt", "rb")  # noqa: SIM115 - a reader holding the old file open
    write_atomically(target, {"a.txt": (b"uno", 0o644)})
    assert (target / "a.txt").read_bytes() == b"uno"
    assert not (target / "dir").exists()  # gone from the new set, gone from the volume
    assert not (target / first).exists()  # the old set removed
    assert held.read() == b"one"  # ... while the reader still reads what it opened
    held.close()
    assert sorted(os.listdir(target)) == sorted(["..data", os.readlink(target / "..data"), "a.txt"])


junk = st.recursive(
    st.none() | st.booleans() | st.integers(-1, 0o1000) | st.sampled_from(["site", "tls", "x", "../x", "a/b"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["name", "secretName", "items", "key", "path", "mode", "defaultMode", "optional", "fieldRef"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["configMap", "secret", "downwardAPI", "projected", "emptyDir"]), junk)
def test_a_volume_of_any_shape_gives_files_or_a_volume_error(kind: str, spec: Any) -> None:
    try:
        out = files({kind: spec})
    except VolumeError:
        return
    for path, (content, mode) in (out or {}).items():
        check_path(path, "p")
        assert isinstance(content, bytes) and 0 <= mode <= 0o777


def test_downward_files_of_an_unset_limit_read_the_nodes_allocatable() -> None:
    """Conformance's 'node allocatable as default limit': downwardAPI and projected alike."""
    pod = {**POD, "spec": {"containers": [{"name": "app"}]}}
    sources = Sources(lambda ns, n: None, lambda ns, n: None, allocatable={"cpu": "2", "memory": "512Mi"})
    items = [
        {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory"}},
    ]
    want = {"cpu": (b"2000", 0o644), "mem": (str(512 * 1024**2).encode(), 0o644)}
    assert files_of({"downwardAPI": {"items": items}}, pod, sources, "v") == want
    projected = {"projected": {"sources": [{"downwardAPI": {"items": items}}]}}
    assert files_of(projected, pod, sources, "v") == want
