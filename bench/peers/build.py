"""`raftkube peers build`: each peer from its generated module, skipped when already built.

Kubernetes' binaries come from one generated module (bench.peers.gomod) after one `go get` of
the packages wanted, each with its `--version` set as Kubernetes' release build sets it
(ldflags into k8s.io/component-base/version); agnhost carries its own image version (its
VERSION file, as its Makefile sets it); ginkgo is the CLI at the version Kubernetes' go.mod
pins (`go install`, since ginkgo has no replace directives); etcd and etcdctl come from a
module requiring both and carry their own versions; etcd's load tool (etcd-benchmark) comes
from a module requiring etcd's root module, at the release ETCD_BENCHMARK_VERSION pins.  Each
binary is built under a temporary name, asked its version (the build fails if it does not
answer with the release asked for; etcd-benchmark, which has no version command, must answer
`--help` as the tool and carry the release in its Go build info), hashed, renamed into place
and recorded in the manifest.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.peers import busybox
from bench.peers.go import BuildError, Go, find_go, json_objects
from bench.peers.gomod import (
    ETCD_ROOT_MODULE,
    GINKGO_MODULE,
    etcd_benchmark_module,
    etcd_module,
    kubernetes_module,
    newest_patch_before,
    required_version,
    staging_modules,
    staging_version,
)
from bench.peers.manifest import Entry, Manifest, State, sha256_of
from machinery.process import peers
from machinery.process.command import UsageError

KUBE = "k8s.io/kubernetes"
SAMPLE_APISERVER = "k8s.io/sample-apiserver"


@dataclass(frozen=True)
class Peer:
    name: str
    package: str
    how: str
    """`build`, `test` (a test binary: `go test -c`), `install` (`go install pkg@version`) or
    `make` (C source with its own Makefile: busybox)."""
    version_args: tuple[str, ...]
    """What makes it print its version."""
    answer: str = ""
    """What a peer with no version command prints when run ("": it prints its version)."""
    mode: int = 0o755
    """Its file mode once built: nonewprivs is setuid and setgid root, as its image's Dockerfile
    (`chmod +s`) makes it, so that a container running as another user gains root through it
    unless allowPrivilegeEscalation is false."""
    module: str = ""
    """The module whose release the binary's Go build info must name (`go version -m`): the
    version check of a peer that prints no version of its own (etcd-benchmark)."""


PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer("kube-apiserver", f"{KUBE}/cmd/kube-apiserver", "build", ("--version",)),
        Peer("kube-controller-manager", f"{KUBE}/cmd/kube-controller-manager", "build", ("--version",)),
        Peer("kube-scheduler", f"{KUBE}/cmd/kube-scheduler", "build", ("--version",)),
        Peer("e2e.test", f"{KUBE}/test/e2e", "test", ("--version",)),
        Peer("ginkgo", f"{GINKGO_MODULE}/ginkgo", "install", ("version",)),
        Peer("agnhost", f"{KUBE}/test/images/agnhost", "build", ("--version",)),
        Peer("nonewprivs", f"{KUBE}/test/images/nonewprivs", "build", (), answer="Effective uid: ", mode=0o6755),
        # the e2e sample-apiserver image's program (conformance's Aggregator spec): a staging
        # module, built at the release the Kubernetes module replaces it with
        Peer("sample-apiserver", SAMPLE_APISERVER, "build", ("--help",), answer="Launch a wardle API server"),
        Peer("etcd", "go.etcd.io/etcd/server/v3", "build", ("--version",)),
        Peer("etcdctl", "go.etcd.io/etcd/etcdctl/v3", "build", ("version",)),
        # etcd's own load tool, in etcd's root module; it has no version command
        Peer(
            "etcd-benchmark",
            f"{ETCD_ROOT_MODULE}/tools/benchmark",
            "build",
            ("--help",),
            answer="benchmark is a low-level benchmark tool for etcd3",
            module=ETCD_ROOT_MODULE,
        ),
        Peer("busybox", "busybox", "make", ("--help",)),
    )
}
assert tuple(PEERS) == peers.ALL_PEERS


IMAGE_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "agnhost": (
        ("test/images/agnhost/porter/localhost.crt", "localhost.crt"),
        ("test/images/agnhost/porter/localhost.key", "localhost.key"),
        # the nautilus and kitten images are agnhost with these added (kubectl's Update Demo)
        *(
            (f"test/images/{demo}/html/{file}", f"{demo}/{file}")
            for demo in ("nautilus", "kitten")
            for file in ("data.json", f"{demo}.jpg")
        ),
    )
}
"""(file in the Kubernetes source, its name in `<peer>-files/`): what the peer's image ADDs
besides the program and the program reads (agnhost's Dockerfile puts these at its root; the
kubelet's image table binds them there)."""


def needs_go(names: list[str]) -> bool:
    return any(PEERS[n].how != "make" for n in names)


def kube_ldflags(version: str) -> str:
    """What Kubernetes' release build (hack/lib/version.sh) stamps into component-base."""
    major, minor = version.lstrip("v").split(".")[:2]
    base = "k8s.io/component-base/version"
    return (
        f"-s -w -X {base}.gitVersion={version} -X {base}.gitMajor={major} -X {base}.gitMinor={minor}"
        f" -X {base}.gitTreeState=clean"
    )


def check_version(flag: str, value: str, pattern: str, example: str) -> str:
    if not re.fullmatch(pattern, value):
        raise UsageError(f"{flag} {value!r}: want a release of that line, like {example}")
    return value


def selected(only: str | None) -> list[str]:
    """The peers `--only a,b` names, in build order (all of them without it)."""
    if not only:
        return list(PEERS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown or not names:
        raise UsageError(f"--only {only!r}: unknown peer {', '.join(unknown) or '(none)'}; one of {', '.join(PEERS)}")
    return [n for n in PEERS if n in names]


class Builder:
    """Builds the chosen peers of one Kubernetes and one etcd release, saying each step."""

    def __init__(
        self, go: Go | None, kubernetes: str, etcd: str, say: Callable[[str], None], compiler: str = ""
    ) -> None:
        self._go = go
        self.compiler = compiler
        """The C compiler's version line, recorded with what `make` builds."""
        self.versions = {
            **dict.fromkeys(peers.KUBERNETES_PEERS, kubernetes),
            **dict.fromkeys(peers.ETCD_PEERS, etcd),
            **dict.fromkeys(peers.ETCD_BENCHMARK_PEERS, peers.ETCD_BENCHMARK_VERSION),
            **dict.fromkeys(peers.BUSYBOX_PEERS, peers.BUSYBOX_VERSION),
        }
        self.say = say
        self.kube_gomod: str | None = None
        self.kube_source_dir: Path | None = None
        self.stand_ins: dict[str, str] = {}
        """Staging module -> the older release that stands in for Kubernetes' (unserved_staging)."""

    @property
    def go(self) -> Go:
        if self._go is None:  # run() finds go whenever a Go peer is chosen
            raise BuildError("no go toolchain was found for a Go peer")
        return self._go

    def workdir(self, peer: str) -> Path:
        return peers.peers_root() / "build" / peers.version_dir(peer, self.versions[peer]).name

    def build_all(self, names: list[str]) -> None:
        manifests: dict[Path, Manifest] = {}
        todo = []
        for name in names:
            folder = peers.version_dir(name, self.versions[name])
            manifest = manifests.setdefault(folder, Manifest(folder))
            state = manifest.state(name, self.versions[name])
            if state is State.PRESENT and not self.image_files_present(name):
                state = State.MISSING  # built before its image files were: built again, with them
            if state is State.PRESENT:
                sha = manifest.entries[name].sha256[:12]
                self.say(f"{name:<24} {self.versions[name]:<9} skipped: built ({sha})")
            else:
                todo.append((name, manifest, state))
        prepared: set[Path] = set()
        for name, manifest, state in todo:
            workdir = self.workdir(name)
            if workdir not in prepared:
                self.prepare(workdir, [n for n, _, _ in todo if self.workdir(n) == workdir])
                prepared.add(workdir)
            self.build_one(PEERS[name], manifest, state)

    def prepare(self, workdir: Path, names: list[str]) -> None:
        """Write the module `names` are built in and fetch what they import."""
        started = time.monotonic()
        version = self.versions[names[0]]
        if names[0] in peers.BUSYBOX_PEERS:
            url = busybox.SOURCE_URL.format(version=version.lstrip("v"))
            self.say(f"{'(busybox source)':<24} {version:<9} fetching {url} ...")
            busybox.fetch_source(version.lstrip("v"), workdir)
        elif names[0] in peers.ETCD_PEERS:
            self.say(f"{'(etcd module)':<24} {version:<9} resolving in {workdir} ...")
            workdir.mkdir(parents=True, exist_ok=True)
            (workdir / "go.mod").write_text(etcd_module(version))
            self.go.run(["get", *(f"{PEERS[n].package}@{version}" for n in names)], workdir, {"GOFLAGS": "-mod=mod"})
        elif names[0] in peers.ETCD_BENCHMARK_PEERS:
            self.say(f"{'(etcd root module)':<24} {version:<9} resolving in {workdir} ...")
            workdir.mkdir(parents=True, exist_ok=True)
            (workdir / "go.mod").write_text(etcd_benchmark_module(version))
            self.go.run(["get", *(f"{PEERS[n].package}@{version}" for n in names)], workdir, {"GOFLAGS": "-mod=mod"})
        else:
            self.say(f"{'(kubernetes module)':<24} {version:<9} resolving in {workdir} ...")
            workdir.mkdir(parents=True, exist_ok=True)
            # Outside any module (the build folder's parent has no go.mod), so a stale generated
            # module cannot get in the way of reading Kubernetes' own go.mod.
            info = json.loads(self.go.run(["mod", "download", "-json", f"{KUBE}@{version}"], workdir.parent))
            self.kube_gomod = Path(info["GoMod"]).read_text()
            self.kube_source_dir = Path(info["Dir"]) if info.get("Dir") else None
            overrides = self.unserved_staging(workdir.parent, self.kube_gomod, version)
            self.stand_ins = overrides
            (workdir / "go.mod").write_text(kubernetes_module(self.kube_gomod, version, overrides))
            # a staging module's own program (sample-apiserver) is got without a version: the
            # go.mod's replace pins whichever is required to the release chosen for it
            wanted = [
                f"{PEERS[n].package}@{version}" if PEERS[n].package.startswith(KUBE) else PEERS[n].package
                for n in names
                if PEERS[n].how != "install"
            ]
            if wanted:
                self.go.run(["get", *wanted], workdir, {"GOFLAGS": "-mod=mod"})
        self.say(f"{'':<24} {'':<9} resolved in {time.monotonic() - started:.0f} s")

    def unserved_staging(self, cwd: Path, kubernetes_gomod: str, version: str) -> dict[str, str]:
        """Each staging module the proxy does not serve at Kubernetes' matching release, and the
        newest older patch release of it that stands in.  (The proxy answers 403 "not available"
        for k8s.io/sample-apiserver v0.33.13's source, which e2e.test imports.)"""
        staged = staging_version(version)
        wanted = [f"{m}@{staged}" for m in staging_modules(kubernetes_gomod)]
        overrides: dict[str, str] = {}
        for info in json_objects(self.go.run(["mod", "download", "-json", *wanted], cwd, check=False)):
            error = str(info.get("Error") or "")
            if not error:
                continue
            module = str(info.get("Path"))
            listing = json_objects(self.go.run(["list", "-m", "-versions", "-json", module], cwd, check=False))
            versions = listing[0].get("Versions") if listing else None
            stand_in = newest_patch_before([str(v) for v in versions] if isinstance(versions, list) else [], staged)
            reason = error.splitlines()[0].rsplit(": ", 1)[-1]  # "403 Forbidden"
            said = f"{'':<24} {'':<9} {module}@{staged} is not served ({reason})"
            if stand_in is None:
                # Left as it is: only a peer that imports it fails, with go's own message.
                self.say(f"{said}, nor an older patch: left at {staged}")
                continue
            self.say(f"{said}: using {stand_in}")
            overrides[module] = stand_in
        return overrides

    def build_one(self, peer: Peer, manifest: Manifest, state: State) -> None:
        version = self.versions[peer.name]
        why = "" if state is State.MISSING else f" (was {state.value})"
        self.say(f"{peer.name:<24} {version:<9} building{why} ...")
        started = time.monotonic()
        workdir = self.workdir(peer.name)
        manifest.folder.mkdir(parents=True, exist_ok=True)
        part = manifest.folder / f".{peer.name}.part"
        source, expect = f"{peer.package}@{self.stand_ins.get(peer.package, version)}", version.lstrip("v")
        toolchain = self.compiler if peer.how == "make" else self.go.version
        if peer.how == "make":
            source = f"{busybox.SOURCE_URL.format(version=expect)} (sha256 {busybox.SOURCE_SHA256[expect][:12]})"
            busybox.build(workdir / f"busybox-{expect}", part)
            part.chmod(0o755)
        elif peer.how == "install":
            pinned = required_version(self.kube_gomod or "", GINKGO_MODULE)
            if pinned is None:
                raise BuildError(f"k8s.io/kubernetes {version}'s go.mod pins no {GINKGO_MODULE}")
            source, expect = f"{peer.package}@{pinned}", pinned.lstrip("v")
            with tempfile.TemporaryDirectory(dir=manifest.folder, prefix=".gobin-") as gobin:
                self.go.run(
                    ["install", "-trimpath", "-ldflags=-s -w", source], workdir, {"GOBIN": gobin, "GOFLAGS": ""}
                )
                Path(gobin, "ginkgo").replace(part)
        else:
            ldflags = "-s -w"
            if peer.package.startswith(KUBE + "/cmd/") or peer.how == "test":
                ldflags = kube_ldflags(version)
            elif peer.name == "agnhost":
                expect = self.agnhost_version()
                ldflags = f"-s -w -X main.Version={expect}"
            verb = ["test", "-c"] if peer.how == "test" else ["build"]
            args = [
                *verb,
                "-mod=mod",
                "-buildvcs=false",
                "-trimpath",
                "-ldflags",
                ldflags,
                "-o",
                str(part),
                peer.package,
            ]
            self.go.run(args, workdir)
        reports = self.version_of(part, peer, peer.answer or expect)
        if peer.module:
            reports = f"{peer.module} {self.module_version(part, peer.module, version)} (Go build info); {reports}"
        self.install_image_files(peer.name)
        part.chmod(peer.mode)
        sha = sha256_of(part)
        part.replace(manifest.folder / peer.name)
        seconds = round(time.monotonic() - started, 1)
        built_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        manifest.record(Entry(peer.name, version, source, sha, built_at, seconds, toolchain, reports))
        self.say(f"{peer.name:<24} {version:<9} built in {seconds:.0f} s ({sha[:12]})")

    def image_files_present(self, name: str) -> bool:
        folder = peers.image_files_dir(name, self.versions[name])
        return all((folder / file).is_file() for _, file in IMAGE_FILES.get(name, ()))

    def install_image_files(self, name: str) -> None:
        """Copy the files `name`'s image adds from the Kubernetes source into `<peer>-files/`."""
        wanted = IMAGE_FILES.get(name, ())
        if not wanted:
            return
        folder = peers.image_files_dir(name, self.versions[name])
        for source, file in wanted:
            origin = (self.kube_source_dir or Path("/nonexistent")) / source
            try:
                (folder / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(origin, folder / file)
            except OSError as e:
                raise BuildError(f"{name}'s image file {source} could not be copied: {e}") from None
            (folder / file).chmod(0o644)

    def agnhost_version(self) -> str:
        """agnhost's own image version (test/images/agnhost/VERSION), which its Makefile stamps."""
        try:
            return (
                (self.kube_source_dir or Path("/nonexistent"))
                .joinpath("test/images/agnhost/VERSION")
                .read_text()
                .strip()
            )
        except OSError:
            return "unknown"

    def module_version(self, binary: Path, module: str, expect: str) -> str:
        """The release of `module` that `binary`'s Go build info names, which must be `expect`:
        for a peer with no version command, the only evidence of which release it was built
        from (the module graph could have moved it: a newer sibling requiring it, say)."""
        info = json_objects(self.go.run(["version", "-m", "-json", str(binary)], binary.parent))
        deps = info[0].get("Deps") if info else None
        entries = [info[0].get("Main") if info else None, *(deps if isinstance(deps, list) else [])]
        found = None
        for entry in entries:
            if isinstance(entry, dict) and entry.get("Path") == module:
                found = str(entry.get("Version"))
        if found != expect:
            raise BuildError(f"{binary}'s Go build info names {module} {found or '(none)'}, not {expect}")
        return found

    def version_of(self, binary: Path, peer: Peer, expect: str) -> str:
        """The first line `binary` answers its version command with; it must name `expect`."""
        try:
            proc = subprocess.run(  # argv[0] is its name: busybox picks its applet by it
                [peer.name, *peer.version_args],
                executable=str(binary),
                check=False,
                capture_output=True,
                text=True,
                timeout=60,
                errors="replace",
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BuildError(f"the built {peer.name} does not run ({e})") from e
        answer = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0 or expect not in answer:
            raise BuildError(
                f"the built {peer.name} answers `{' '.join(peer.version_args)}` with exit {proc.returncode} and "
                f"{answer[:300]!r}, not with its version {expect}"
            )
        return answer.splitlines()[0][:200]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Build the upstream peers (kube-apiserver, kube-controller-manager, kube-scheduler, e2e.test, ginkgo, "
        "agnhost, nonewprivs, sample-apiserver, etcd, etcdctl, etcd-benchmark (etcd's load tool, at "
        f"{peers.ETCD_BENCHMARK_VERSION}: the newest etcd 3.6 root module the proxy serves); "
        "busybox from its C source) "
        f"with the machine's go through the Go module proxy into {peers.peers_root()}/; "
        "what is already built (manifest.json, sha256) is skipped."
    )
    parser.add_argument("--kubernetes", default=peers.KUBERNETES_VERSION, metavar="v1.33.N", help="Kubernetes release")
    parser.add_argument("--etcd", default=peers.ETCD_VERSION, metavar="v3.6.N", help="etcd release")
    parser.add_argument("--only", metavar="PEER,...", help=f"build only these: {', '.join(PEERS)}")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    kubernetes = check_version("--kubernetes", args.kubernetes, r"v1\.33\.\d+", peers.KUBERNETES_VERSION)
    etcd = check_version("--etcd", args.etcd, r"v3\.6\.\d+", peers.ETCD_VERSION)
    names = selected(args.only)
    go = find_go() if needs_go(names) else None
    compiler = busybox.find_toolchain() if "busybox" in names else ""
    started = time.monotonic()
    tools = [f"{go.version}, GOPROXY={go.proxy}"] if go else []
    tools += [compiler] if compiler else []
    print(f"peers: {'; '.join(tools)}, into {peers.peers_root()}", flush=True)
    try:
        Builder(go, kubernetes, etcd, lambda line: print(line, flush=True), compiler).build_all(names)
    except BuildError as e:
        print(f"raftkube: peers build failed: {e}", file=sys.stderr)
        return 1
    print(f"peers: done in {time.monotonic() - started:.0f} s", flush=True)
    return 0
