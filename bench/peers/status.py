"""`raftkube peers status`: which peers are built, where, and whether each is still the binary
the manifest recorded (a sha256 mismatch is `corrupt`).  Exit 1 when any is not present, so
a script (or a test with the `peers` marker) can stop at once with the build command."""

from __future__ import annotations

import argparse

from bench.peers.build import PEERS, check_version
from bench.peers.manifest import Manifest, State
from machinery.process import peers


def rows(kubernetes: str, etcd: str) -> list[tuple[str, str, State, str, str]]:
    """(peer, version built, state, sha256 prefix, path) for every peer."""
    out = []
    manifests: dict[str, Manifest] = {}
    for name in PEERS:
        version = {"etcd": etcd, "kubernetes": kubernetes}.get(peers.family(name), peers.pinned_version(name))
        folder = peers.version_dir(name, version)
        manifest = manifests.setdefault(str(folder), Manifest(folder))
        state = manifest.state(name, version)
        entry = manifest.entries.get(name)
        sha = entry.sha256[:12] if entry and state is not State.MISSING else "-"
        # ginkgo's own release (the one Kubernetes pins) says more than its folder's
        pinned_elsewhere = PEERS[name].how == "install"
        shown = entry.source.rsplit("@", 1)[-1] if entry and state is State.PRESENT and pinned_elsewhere else version
        out.append((name, shown, state, sha, str(folder / name)))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = f"List the built upstream peers in {peers.peers_root()}/ (exit 1 if any is not present)."
    parser.add_argument("--kubernetes", default=peers.KUBERNETES_VERSION, metavar="v1.33.N", help="Kubernetes release")
    parser.add_argument("--etcd", default=peers.ETCD_VERSION, metavar="v3.6.N", help="etcd release")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    kubernetes = check_version("--kubernetes", args.kubernetes, r"v1\.33\.\d+", peers.KUBERNETES_VERSION)
    etcd = check_version("--etcd", args.etcd, r"v3\.6\.\d+", peers.ETCD_VERSION)
    table = rows(kubernetes, etcd)
    print(f"{'PEER':<24} {'VERSION':<9} {'STATE':<8} {'SHA256':<12} PATH")
    for name, version, state, sha, path in table:
        print(f"{name:<24} {version:<9} {state.value:<8} {sha:<12} {path}")
    absent = [name for name, _, state, _, _ in table if state is not State.PRESENT]
    if absent:
        only = "" if len(absent) == len(table) else f" --only {','.join(absent)}"
        flags = "".join(
            f" --{flag} {value}"
            for flag, value, pinned in (
                ("kubernetes", kubernetes, peers.KUBERNETES_VERSION),
                ("etcd", etcd, peers.ETCD_VERSION),
            )
            if value != pinned
        )
        print(f"not built: {', '.join(absent)}; build with: raftkube peers build{flags}{only}")
        return 1
    return 0
