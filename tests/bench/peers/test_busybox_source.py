"""The busybox source tarball is hostile input until its sha256 matches the pin: fetched to a
bound, then unpacked with tarfile's `data` filter.  Offline: file: URLs."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from bench.peers import busybox
from bench.peers.go import BuildError


def tarball_with(path: Path, members: dict[str, bytes]) -> str:
    with tarfile.open(path, "w:bz2") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pin(monkeypatch: pytest.MonkeyPatch, digest: str) -> None:
    monkeypatch.setattr(busybox, "SOURCE_SHA256", {"1.37.0": digest})


def test_a_pinned_tarball_unpacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tarball = tmp_path / "src.tar.bz2"
    pin(monkeypatch, tarball_with(tarball, {"busybox-1.37.0/Makefile": b"all:\n"}))
    source = busybox.fetch_source("1.37.0", tmp_path / "work", f"file://{tarball}")
    assert (source / "Makefile").read_bytes() == b"all:\n"


def test_another_sha256_is_refused_and_not_unpacked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tarball = tmp_path / "src.tar.bz2"
    tarball_with(tarball, {"busybox-1.37.0/Makefile": b"all:\n"})
    pin(monkeypatch, "0" * 64)
    with pytest.raises(BuildError, match="not the pinned 0000"):
        busybox.fetch_source("1.37.0", tmp_path / "work", f"file://{tarball}")
    assert not (tmp_path / "work" / "busybox-1.37.0").exists()


def test_an_unpinned_version_or_a_missing_file_is_a_build_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="no pinned source"):
        busybox.fetch_source("9.9.9", tmp_path)
    with pytest.raises(BuildError, match="could not be fetched"):
        busybox.fetch_source("1.37.0", tmp_path, f"file://{tmp_path}/absent.tar.bz2")


def test_a_download_past_the_bound_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 4096)
    monkeypatch.setattr(busybox, "MAX_SOURCE_BYTES", 1024)
    with pytest.raises(BuildError, match="larger than 1024 bytes"):
        busybox.fetch_source("1.37.0", tmp_path / "work", f"file://{big}")


def test_a_member_escaping_the_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even a tarball that matches its pin never writes outside its folder."""
    tarball = tmp_path / "evil.tar.bz2"
    pin(monkeypatch, tarball_with(tarball, {"../escaped": b"no", "busybox-1.37.0/Makefile": b"all:\n"}))
    with pytest.raises(BuildError, match="does not unpack"):
        busybox.fetch_source("1.37.0", tmp_path / "work", f"file://{tarball}")
    assert not (tmp_path / "escaped").exists()


def test_a_failing_make_shows_the_tail_of_its_output(tmp_path: Path) -> None:
    source = tmp_path / "busybox-1.37.0"
    source.mkdir()
    (source / "Makefile").write_text("defconfig:\n\t@echo 'config.c:1: error: nothing here' && false\n")
    with pytest.raises(BuildError, match=r"make defconfig.*failed \(exit 2\)(.|\n)*config.c:1: error"):
        busybox.build(source, tmp_path / "busybox")
