"""Upstream busybox, built from its release source with the machine's C compiler: what the e2e
busybox image runs.

Why not Debian's /bin/busybox, which the image table used alone before: Debian patches its ash
to drop, at start, environment variables whose names are not shell names (`data-1`, as a
ConfigMap's keys may be), so `sh -c env` in a container printed fewer variables than the
image's upstream busybox does, and conformance's "consumable via the environment" specs
check them.  busybox.net is not reachable from every machine; Debian's archive keeps the
pristine upstream tarball (`busybox_<v>.orig.tar.bz2`, the release as published), so that is
fetched, pinned by sha256, and built with busybox's own defconfig, as the Docker Hub image is.

The tarball is hostile input until its sha256 matches: read to a bound, then unpacked with
tarfile's `data` filter (no absolute paths, no links out, no devices).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

from bench.peers.go import BuildError, failure
from machinery.process.command import UsageError

SOURCE_URL = "http://deb.debian.org/debian/pool/main/b/busybox/busybox_{version}.orig.tar.bz2"
SOURCE_SHA256 = {"1.37.0": "3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4"}
"""The pinned releases' tarballs (as Debian's Sources index lists them)."""
MAX_SOURCE_BYTES = 16 * 1024 * 1024  # 1.37.0's is 2.5 MB
FETCH_TIMEOUT = 120.0


def find_toolchain() -> str:
    """The C compiler's first version line, or a UsageError naming what is missing."""
    missing = [tool for tool in ("cc", "make") if shutil.which(tool) is None]
    if missing:
        raise UsageError(
            f"{' and '.join(missing)} not on PATH: upstream busybox is built from source "
            "(install gcc and make, e.g. `apt-get install gcc make`)"
        )
    proc = subprocess.run(["cc", "--version"], check=False, capture_output=True, text=True, timeout=60)
    return (proc.stdout.splitlines() or ["cc (unknown)"])[0]


def fetch_source(version: str, into: Path, url: str | None = None) -> Path:
    """Download and unpack `version`'s tarball into `into`; the unpacked source folder.  A
    download that fails, runs past MAX_SOURCE_BYTES or has another sha256 is a BuildError."""
    expected = SOURCE_SHA256.get(version)
    if expected is None:
        raise BuildError(f"busybox {version}: no pinned source (known: {', '.join(SOURCE_SHA256)})")
    url = url or SOURCE_URL.format(version=version)
    into.mkdir(parents=True, exist_ok=True)
    tarball = into / f"busybox-{version}.tar.bz2"
    digest = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as answer, tarball.open("wb") as out:
            while block := answer.read(1 << 16):
                size += len(block)
                if size > MAX_SOURCE_BYTES:
                    raise BuildError(f"busybox source {url}: larger than {MAX_SOURCE_BYTES} bytes, refused")
                digest.update(block)
                out.write(block)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        raise BuildError(f"busybox source {url} could not be fetched: {e}") from None
    if digest.hexdigest() != expected:
        tarball.unlink(missing_ok=True)
        raise BuildError(f"busybox source {url}: sha256 {digest.hexdigest()}, not the pinned {expected}")
    source = into / f"busybox-{version}"
    shutil.rmtree(source, ignore_errors=True)
    try:
        with tarfile.open(tarball, "r:bz2") as archive:
            archive.extractall(into, filter="data")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise BuildError(f"busybox source {tarball} does not unpack: {e}") from None
    if not (source / "Makefile").is_file():
        raise BuildError(f"busybox source {tarball} has no busybox-{version}/Makefile")
    return source


def build(source: Path, out: Path, jobs: int | None = None) -> None:
    """`make defconfig` and `make busybox` in `source`; the binary is written to `out`."""
    jobs = jobs or os.cpu_count() or 1
    for args in (["make", "defconfig"], ["make", f"-j{jobs}", "busybox"]):
        proc = subprocess.run(
            args, check=False, cwd=source, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
        if proc.returncode != 0:
            raise BuildError(failure(args, proc.returncode, proc.stdout, ""))
    shutil.copyfile(source / "busybox", out)
