"""The real peers, as `raftkube peers build` left them: `raftkube peers status` says every one
is present, and each answers its version command with the pinned release.  Deselected by
default (the `peers` marker; CI does not build peers): `.ci/run -m peers` runs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.peers.build import PEERS
from bench.peers.manifest import Manifest
from machinery.process import peers
from tests.support.paths import ROOT

pytestmark = pytest.mark.peers


def test_status_says_every_peer_is_present() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "components.cli", "peers", "status"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"peers are missing; build them with `raftkube peers build`:\n{proc.stdout}{proc.stderr}"
    )
    assert proc.stdout.count(" present ") == len(PEERS)


@pytest.mark.parametrize("name", list(PEERS))
def test_each_peer_answers_its_pinned_version(name: str) -> None:
    path = peers.peer_path(name)
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `raftkube peers build --only {name}`")
    expect = peers.pinned_version(name).lstrip("v")
    if name == "ginkgo":
        expect = Manifest(path.parent).entries[name].source.rsplit("@v", 1)[1]  # the version Kubernetes pins
    if name == "agnhost":
        expect = "2."  # agnhost reports its own image version (test/images/agnhost/VERSION)
    if PEERS[name].answer:
        expect = PEERS[name].answer  # nonewprivs has no version: it prints its effective uid
    proc = subprocess.run(
        [str(path), *PEERS[name].version_args], check=False, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and expect in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_etcd_benchmark_carries_its_pinned_release_in_its_build_info() -> None:
    """etcd's load tool has no version command: its Go build info names the etcd root module
    it was built from, which must be the pinned one (not the etcd server's release)."""
    path = peers.peer_path("etcd-benchmark")
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `raftkube peers build --only etcd-benchmark`")
    proc = subprocess.run(["go", "version", "-m", str(path)], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [line.split() for line in proc.stdout.splitlines()]
    assert ["path", "go.etcd.io/etcd/v3/tools/benchmark"] in lines
    modules = {words[1]: words[2] for words in lines if len(words) >= 3 and words[0] in ("mod", "dep")}
    assert modules["go.etcd.io/etcd/v3"] == peers.ETCD_BENCHMARK_VERSION
    assert modules["go.etcd.io/etcd/client/v3"] == peers.ETCD_BENCHMARK_VERSION  # its siblings, from the proxy
