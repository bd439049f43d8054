"""Where the upstream peers live once built: kube-apiserver, kube-controller-manager,
kube-scheduler, e2e.test, ginkgo, agnhost, nonewprivs, sample-apiserver, etcd and etcdctl 3.6, etcd's
load tool (etcd-benchmark, `tools/benchmark`), and upstream busybox (the e2e busybox image's
programs; the only peer built from C).

The peers are yardsticks (tests, conformance, benchmarks), never runtime dependencies, so
they live in the user's cache, outside the repository, one folder per pinned version:
``$XDG_CACHE_HOME/raftkube/peers/kubernetes-v1.33.13/kube-apiserver``.  A version in the
folder name means a new pin never picks up an old binary.  `raftkube peers build` fills the
folders; the kubelet's image table (agnhost, nonewprivs), the conformance runner and the benchmarks read
them through `peer_path`, so the layout is written down once, here.
"""

from __future__ import annotations

import os
from pathlib import Path

KUBERNETES_VERSION = "v1.33.13"
"""The newest v1.33 patch release the Go module proxy serves (kubectl here reaches 1.33, and
our apiserver reports 1.33)."""

ETCD_VERSION = "v3.6.17"
"""The newest etcd 3.6 patch release the Go module proxy serves."""

KUBERNETES_PEERS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "e2e.test",
    "ginkgo",
    "agnhost",
    "nonewprivs",
    "sample-apiserver",
)
ETCD_PEERS = ("etcd", "etcdctl")

ETCD_BENCHMARK_VERSION = "v3.6.14"
"""etcd's load tool (`tools/benchmark`) at the newest etcd 3.6 the Go module proxy serves its
module at, which trails the server's ETCD_VERSION: the tool is in etcd's root module,
go.etcd.io/etcd/v3, not in the server's, and the proxy has that module only up to v3.6.14
(its `@v/list` names only v3.6.0 and v3.6.8, yet every release up to v3.6.14 but v3.6.2 and
v3.6.3 is served when asked for by version; v3.6.15 to v3.6.17 answer 403 "not available";
etcd's tools/v3 module is not served at all, and go.etcd.io is not reachable to fetch it
directly).  A client of the v3 API, not a server, so a few patch releases behind the server
it drives changes nothing it measures (the same gRPC API, client/v3 of the same minor)."""
ETCD_BENCHMARK_PEERS = ("etcd-benchmark",)

BUSYBOX_VERSION = "v1.37.0"
"""Upstream busybox (the e2e image has 1.36.1, whose source no archive reachable here keeps;
1.37.0's pristine tarball is in Debian's)."""

BUSYBOX_PEERS = ("busybox",)

ALL_PEERS = KUBERNETES_PEERS + ETCD_PEERS + ETCD_BENCHMARK_PEERS + BUSYBOX_PEERS

FAMILIES = (
    ("kubernetes", KUBERNETES_PEERS),
    ("etcd", ETCD_PEERS),
    ("etcd-benchmark", ETCD_BENCHMARK_PEERS),
    ("busybox", BUSYBOX_PEERS),
)
"""(family, its peers): each peer is built into the folder `<family>-<release>`.  etcd-benchmark
is a family of its own because it is pinned apart from etcd (ETCD_BENCHMARK_VERSION), and a
folder holds one release."""


def peers_root() -> Path:
    """The cache folder holding every built peer: `$XDG_CACHE_HOME/raftkube/peers`
    (`~/.cache/...` when XDG_CACHE_HOME is unset or empty, as the XDG spec says)."""
    cache = os.environ.get("XDG_CACHE_HOME") or ""
    base = Path(cache) if cache else Path.home() / ".cache"
    return base / "raftkube" / "peers"


def family(peer: str) -> str:
    """The release `peer` comes from: `kubernetes`, `etcd`, `etcd-benchmark` or `busybox`;
    ValueError if none."""
    for name, members in FAMILIES:
        if peer in members:
            return name
    raise ValueError(f"unknown peer {peer!r}: one of {', '.join(ALL_PEERS)}")


def pinned_version(peer: str) -> str:
    """The release of `peer` this code is pinned to."""
    return {
        "kubernetes": KUBERNETES_VERSION,
        "etcd": ETCD_VERSION,
        "etcd-benchmark": ETCD_BENCHMARK_VERSION,
        "busybox": BUSYBOX_VERSION,
    }[family(peer)]


def version_dir(peer: str, version: str | None = None) -> Path:
    """The folder of the version that provides `peer` (kubernetes-<v>, etcd-<v>, etcd-benchmark-<v>,
    busybox-<v>):
    the pinned one unless `version` names another (`raftkube peers build --kubernetes v1.33.N`)."""
    return peers_root() / f"{family(peer)}-{version or pinned_version(peer)}"


def peer_path(peer: str, version: str | None = None) -> Path:
    """Where the binary `peer` is (or will be, once built)."""
    return version_dir(peer, version) / peer


def image_files_dir(peer: str, version: str | None = None) -> Path:
    """Where `raftkube peers build` puts files of `peer`'s image that its program reads
    (agnhost's TLS certificate), beside the peer: `<peer>-files/`."""
    return version_dir(peer, version) / f"{peer}-files"
