"""`raftkube peers build` and `status` run against a fake `go` (fake_go.sh) that records its
arguments: the command's own logic (what it asks go, what it skips, what it records, how it
fails), offline and in seconds.  The real build is checked by test_peers_built.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.peers import busybox
from components.cli.main import main
from machinery.process import peers
from tests.support.paths import ROOT

HERE = Path(__file__).parent
ALL = peers.ALL_PEERS


@dataclass
class FakeGo:
    log: Path

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def builds(self) -> list[str]:
        return [c for c in self.calls() if c.split()[0] in ("build", "test", "install")]


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGo:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(HERE / "fake_go.sh", bin_dir / "go")
    (bin_dir / "go").chmod(0o755)
    kube_dir = tmp_path / "kubernetes-src"
    (kube_dir / "test/images/agnhost").mkdir(parents=True)
    (kube_dir / "test/images/agnhost/VERSION").write_text("2.53\n")
    for name in ("agnhost/porter/localhost.crt", "agnhost/porter/localhost.key", "nautilus/html/data.json"):
        (kube_dir / "test/images" / name).parent.mkdir(parents=True, exist_ok=True)
        (kube_dir / "test/images" / name).write_text(f"the image's {Path(name).name}\n")
    for name in ("nautilus/html/nautilus.jpg", "kitten/html/kitten.jpg", "kitten/html/data.json"):
        (kube_dir / "test/images" / name).parent.mkdir(parents=True, exist_ok=True)
        (kube_dir / "test/images" / name).write_bytes(b"\xff\xd8")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_GO_LOG", str(tmp_path / "go.log"))
    monkeypatch.setenv("FAKE_KUBE_GOMOD", str(HERE / "data" / "kubernetes-v1.33.13.go.mod"))
    monkeypatch.setenv("FAKE_KUBE_DIR", str(kube_dir))
    fake_busybox_source(tmp_path / "busybox-src", monkeypatch)
    return FakeGo(tmp_path / "go.log")


FAKE_MAKEFILE = """defconfig:
\t@echo configured
busybox:
\t@printf '#!/bin/sh\\necho "BusyBox v1.37.0 (fake) multi-call binary."\\n' > busybox
"""


def fake_busybox_source(folder: Path, monkeypatch: pytest.MonkeyPatch, makefile: str = FAKE_MAKEFILE) -> Path:
    """A busybox release tarball whose Makefile "builds" a script answering as busybox does,
    served from a file: URL and pinned by its sha256, so the build runs offline with real make."""
    source = folder / "busybox-1.37.0"
    source.mkdir(parents=True)
    (source / "Makefile").write_text(makefile)
    tarball = folder / "busybox_1.37.0.orig.tar.bz2"
    with tarfile.open(tarball, "w:bz2") as archive:
        archive.add(source, arcname="busybox-1.37.0")
    monkeypatch.setattr(busybox, "SOURCE_URL", f"file://{folder}/busybox_{{version}}.orig.tar.bz2")
    monkeypatch.setattr(busybox, "SOURCE_SHA256", {"1.37.0": hashlib.sha256(tarball.read_bytes()).hexdigest()})
    return tarball


def manifest(folder: str) -> dict[str, dict[str, object]]:
    return dict(json.loads((peers.peers_root() / folder / "manifest.json").read_text())["peers"])


def test_builds_every_peer_stamped_and_recorded(fake_go: FakeGo, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peers", "build"]) == 0
    out = capsys.readouterr().out
    for name in ALL:
        assert f"{name} " in out and peers.peer_path(name).is_file()
    assert out.count(" built in ") == len(ALL)
    kube, etcd = manifest("kubernetes-v1.33.13"), manifest("etcd-v3.6.17")
    assert set(kube) == set(peers.KUBERNETES_PEERS) and set(etcd) == set(peers.ETCD_PEERS)
    assert set(manifest(f"etcd-benchmark-{peers.ETCD_BENCHMARK_VERSION}")) == {"etcd-benchmark"}
    assert kube["ginkgo"]["source"] == "github.com/onsi/ginkgo/v2/ginkgo@v2.21.0"
    assert kube["kube-apiserver"]["go"] == "go1.99-fake" and etcd["etcd"]["version"] == "v3.6.17"
    builds = fake_go.builds()
    apiserver = next(c for c in builds if c.endswith("k8s.io/kubernetes/cmd/kube-apiserver"))
    assert "-X k8s.io/component-base/version.gitVersion=v1.33.13" in apiserver
    assert "gitMajor=1 " in apiserver and "gitMinor=33 " in apiserver and "gitTreeState=clean" in apiserver
    assert any(c.startswith("test -c ") and c.endswith("k8s.io/kubernetes/test/e2e") for c in builds)
    assert any("-X main.Version=2.53" in c for c in builds)
    # agnhost's image files, from the source, beside it (the kubelet binds them at /localhost.*)
    assert (peers.image_files_dir("agnhost") / "localhost.crt").read_text() == "the image's localhost.crt\n"
    assert (peers.image_files_dir("agnhost") / "nautilus/data.json").read_text() == "the image's data.json\n"
    # nonewprivs answers with its effective uid, and is setuid root as its image makes it
    assert kube["nonewprivs"]["reports"].startswith("Effective uid: ")
    assert stat.S_IMODE(peers.peer_path("nonewprivs").stat().st_mode) == 0o6755
    # busybox comes from its pinned C source, built by make with the machine's compiler
    box = manifest("busybox-v1.37.0")["busybox"]
    assert str(box["source"]).endswith(f"(sha256 {busybox.SOURCE_SHA256['1.37.0'][:12]})")
    assert str(box["reports"]).startswith("BusyBox v1.37.0") and str(box["go"]).startswith("cc ")
    assert "install -trimpath -ldflags=-s -w github.com/onsi/ginkgo/v2/ginkgo@v2.21.0" in builds
    gomod = (peers.peers_root() / "build/kubernetes-v1.33.13/go.mod").read_text()
    assert "k8s.io/client-go => k8s.io/client-go v0.33.13" in gomod
    assert main(["peers", "status"]) == 0
    status = capsys.readouterr().out.splitlines()
    assert next(line for line in status if line.startswith("ginkgo ")).split()[1:3] == ["v2.21.0", "present"]


def test_etcd_benchmark_is_built_from_etcds_root_module_at_its_own_pin(
    fake_go: FakeGo, capsys: pytest.CaptureFixture[str]
) -> None:
    """etcd's load tool trails the server's release (the proxy serves etcd's root module only up
    to ETCD_BENCHMARK_VERSION): its own folder, its own generated module, checked by its build
    info since it has no version command; `--etcd` moves the server, never the tool."""
    pin = peers.ETCD_BENCHMARK_VERSION
    assert pin != peers.ETCD_VERSION and pin.startswith("v3.6.")
    assert main(["peers", "build", "--only", "etcd-benchmark", "--etcd", "v3.6.2"]) == 0
    assert peers.peer_path("etcd-benchmark") == peers.peers_root() / f"etcd-benchmark-{pin}" / "etcd-benchmark"
    assert peers.peer_path("etcd-benchmark").is_file()
    gomod = (peers.peers_root() / f"build/etcd-benchmark-{pin}/go.mod").read_text()
    assert f"require go.etcd.io/etcd/v3 {pin}\n" in gomod and "replace" not in gomod
    calls = fake_go.calls()
    assert f"get go.etcd.io/etcd/v3/tools/benchmark@{pin}" in calls
    build = next(c for c in fake_go.builds() if c.endswith(" go.etcd.io/etcd/v3/tools/benchmark"))
    assert build.startswith("build -mod=mod -buildvcs=false -trimpath ")
    entry = manifest(f"etcd-benchmark-{pin}")["etcd-benchmark"]
    assert entry["version"] == pin and entry["source"] == f"go.etcd.io/etcd/v3/tools/benchmark@{pin}"
    assert (
        entry["reports"]
        == f"go.etcd.io/etcd/v3 {pin} (Go build info); benchmark is a low-level benchmark tool for etcd3."
    )
    assert not (peers.peers_root() / "etcd-v3.6.2").exists()
    capsys.readouterr()
    assert main(["peers", "status"]) == 1
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("etcd-benchmark "))
    assert row.split()[1:3] == [pin, "present"] and row.endswith(f"etcd-benchmark-{pin}/etcd-benchmark")


def test_an_etcd_benchmark_of_another_release_is_refused(
    fake_go: FakeGo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Should the module graph move etcd's root module (or the tool's build info not name it),
    the build fails rather than record the wrong release under the pinned one."""
    monkeypatch.setenv("FAKE_GO_BUILDINFO_VERSION", "v3.6.99")
    assert main(["peers", "build", "--only", "etcd-benchmark"]) == 1
    err = capsys.readouterr().err
    assert f"build info names go.etcd.io/etcd/v3 v3.6.99, not {peers.ETCD_BENCHMARK_VERSION}" in err
    assert not peers.peer_path("etcd-benchmark").exists()


def test_a_second_build_skips_everything(fake_go: FakeGo, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peers", "build"]) == 0
    before = len(fake_go.calls())
    capsys.readouterr()
    assert main(["peers", "build"]) == 0
    out = capsys.readouterr().out
    assert out.count("skipped: built") == len(ALL) and "building" not in out
    assert [c.split()[0] for c in fake_go.calls()[before:]] == ["env"]


def test_a_corrupt_or_misrecorded_binary_is_rebuilt_alone(fake_go: FakeGo, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peers", "build"]) == 0
    with peers.peer_path("etcdctl").open("ab") as f:
        f.write(b"\0")
    folder = peers.version_dir("kube-scheduler")
    body = json.loads((folder / "manifest.json").read_text())
    body["peers"]["kube-scheduler"]["version"] = "v1.33.1"
    (folder / "manifest.json").write_text(json.dumps(body))
    capsys.readouterr()
    assert main(["peers", "status"]) == 1
    status = capsys.readouterr().out
    assert "corrupt" in next(line for line in status.splitlines() if line.startswith("etcdctl "))
    assert "build with: raftkube peers build --only kube-scheduler,etcdctl" in status
    before = len(fake_go.builds())
    assert main(["peers", "build"]) == 0
    out = capsys.readouterr().out
    rebuilt = fake_go.builds()[before:]
    assert len(rebuilt) == 2 and rebuilt[0].endswith("cmd/kube-scheduler") and rebuilt[1].endswith("etcdctl/v3")
    assert "etcdctl" in out and "building (was corrupt)" in out
    assert main(["peers", "status"]) == 0


def test_another_release_builds_into_its_own_folder(fake_go: FakeGo, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peers", "build", "--only", "kube-apiserver"]) == 0
    assert main(["peers", "build", "--only", "kube-apiserver", "--kubernetes", "v1.33.2"]) == 0
    assert "skipped" not in capsys.readouterr().out
    assert peers.peer_path("kube-apiserver", "v1.33.2").is_file() and peers.peer_path("kube-apiserver").is_file()
    assert "mod download -json k8s.io/kubernetes@v1.33.2" in fake_go.calls()
    assert fake_go.calls()[-1].endswith("cmd/kube-apiserver") and "gitVersion=v1.33.2 " in fake_go.calls()[-1]


def test_no_go_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["peers", "build"]) == 2
    assert "`go` is not on PATH" in capsys.readouterr().err


def test_proxy_off(fake_go: FakeGo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_GOPROXY", "off")
    assert main(["peers", "build"]) == 2
    assert "Go module proxy is off (GOPROXY=off)" in capsys.readouterr().err
    assert fake_go.builds() == []


def test_a_failing_go_shows_the_tail_of_its_output(
    fake_go: FakeGo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL", "build")
    assert main(["peers", "build", "--only", "etcd"]) == 1
    err = capsys.readouterr().err
    assert "peers build failed: `go build " in err and "(exit 1)" in err
    assert "undefined: everything" in err and "noise line 59" in err and "noise line 10\n" not in err
    assert not peers.peer_path("etcd").exists() and not (peers.version_dir("etcd") / "manifest.json").exists()


def test_an_unreachable_proxy_is_named(
    fake_go: FakeGo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL", "get")
    monkeypatch.setenv(
        "FAKE_GO_FAIL_LINE", "go: k8s.io/kubernetes@v1.33.13: dial tcp: lookup proxy.golang.org: no such host"
    )
    assert main(["peers", "build", "--only", "kube-apiserver"]) == 1
    assert "looks unreachable" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--kubernetes", "v1.34.0"],
        ["--kubernetes", "1.33.13"],
        ["--etcd", "v3.5.21"],
        ["--only", "kubectl"],
        ["--only", ","],
    ],
)
def test_usage_errors(fake_go: FakeGo, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peers", "build", *argv]) == 2
    assert argv[0] in capsys.readouterr().err and fake_go.calls() == []


def test_the_peers_commands_are_loaded_only_when_run() -> None:
    probe = (
        "import sys\nfrom components.cli.main import build_parser\n"
        "build_parser().parse_args(['status'])\nassert not any(m.startswith('bench') for m in sys.modules)\n"
        "args = build_parser().parse_args(['peers', 'status'])\nassert args.run.__module__ == 'bench.peers.status'\n"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True, timeout=120)


def test_an_unserved_staging_module_stands_in_at_an_older_patch(
    fake_go: FakeGo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_GO_UNSERVED", "k8s.io/sample-apiserver")
    assert main(["peers", "build", "--only", "e2e.test"]) == 0
    assert "k8s.io/sample-apiserver@v0.33.13 is not served" in capsys.readouterr().out
    gomod = (peers.peers_root() / "build/kubernetes-v1.33.13/go.mod").read_text()
    assert "k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.33.5\n" in gomod
    assert "k8s.io/client-go => k8s.io/client-go v0.33.13\n" in gomod


def test_busybox_alone_needs_no_go(fake_go: FakeGo, monkeypatch: pytest.MonkeyPatch) -> None:
    (Path(os.environ["FAKE_GO_LOG"]).parent / "bin" / "go").unlink()
    assert main(["peers", "build", "--only", "busybox"]) == 0
    assert peers.peer_path("busybox").is_file()
    assert main(["peers", "build", "--only", "busybox,etcd"]) == 2  # etcd needs go: usage, nothing built


def test_an_agnhost_built_before_its_image_files_is_built_again_with_them(fake_go: FakeGo) -> None:
    assert main(["peers", "build", "--only", "agnhost"]) == 0
    shutil.rmtree(peers.image_files_dir("agnhost"))
    before = len(fake_go.builds())
    assert main(["peers", "build", "--only", "agnhost"]) == 0
    assert len(fake_go.builds()) == before + 1
    assert (peers.image_files_dir("agnhost") / "localhost.key").is_file()
