"""hostPath volumes checked as kube's hostPath plugin checks them at SetUp: each type against
what the path is, the `...OrCreate` types making what is missing, in kube's words."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from components.kubelet import hostpath
from components.kubelet.volumes import VolumeError

WHERE = "spec.volumes[0].hostPath"


def test_or_create_types_make_what_is_missing_and_unset_makes_a_directory(tmp_path: Path) -> None:
    assert hostpath.set_up({"path": f"{tmp_path}/d/e", "type": "DirectoryOrCreate"}, WHERE) == f"{tmp_path}/d/e"
    assert (tmp_path / "d" / "e").is_dir() and (tmp_path / "d" / "e").stat().st_mode & 0o777 == 0o755
    hostpath.set_up({"path": f"{tmp_path}/f", "type": "FileOrCreate"}, WHERE)
    assert (tmp_path / "f").read_bytes() == b""
    (tmp_path / "f").write_text("kept")
    hostpath.set_up({"path": f"{tmp_path}/f", "type": "FileOrCreate"}, WHERE)
    assert (tmp_path / "f").read_text() == "kept"  # an existing file is left as it is
    hostpath.set_up({"path": f"{tmp_path}/plain"}, WHERE)
    assert (tmp_path / "plain").is_dir()
    hostpath.set_up({"path": f"{tmp_path}/f", "type": ""}, WHERE)  # unset checks nothing


def test_each_type_must_be_what_it_names(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        ok = [("Directory", "dir"), ("File", "file"), ("Socket", "sock"), ("FileOrCreate", "file")]
        for kind, name in ok:
            hostpath.set_up({"path": f"{tmp_path}/{name}", "type": kind}, WHERE)
        hostpath.set_up({"path": "/dev/null", "type": "CharDevice"}, WHERE)
        bad = [
            ("Directory", "file", "is not a directory"),
            ("DirectoryOrCreate", "file", "is not a directory"),
            ("File", "dir", "is not a file"),
            ("FileOrCreate", "dir", "is not a file"),
            ("File", "missing", "is not a file"),
            ("Socket", "file", "is not a socket file"),
            ("CharDevice", "file", "is not a character device"),
            ("BlockDevice", "file", "is not a block device"),
        ]
        for kind, name, words in bad:
            with pytest.raises(VolumeError) as e:
                hostpath.set_up({"path": f"{tmp_path}/{name}", "type": kind}, WHERE)
            assert str(e.value) == f"hostPath type check failed: {tmp_path}/{name} {words}"
        assert not (tmp_path / "missing").exists()  # a failed check makes nothing
    finally:
        sock.close()


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"path": "relative"}, f"{WHERE}.path: must be an absolute path, got 'relative'"),
        ({"path": 7}, f"{WHERE}.path: must be an absolute path, got 7"),
        ({}, f"{WHERE}.path: must be an absolute path, got None"),
        ({"path": "/a/../etc"}, "invalid HostPath `/a/../etc`: must not contain '..'"),
        ({"path": "/tmp", "type": "Nope"}, "Nope is an invalid volume type"),
    ],
)
def test_bad_sources_are_refused(source: dict[str, object], message: str) -> None:
    with pytest.raises(VolumeError) as e:
        hostpath.set_up(source, WHERE)
    assert str(e.value) == message
    assert not os.path.exists("/a")
