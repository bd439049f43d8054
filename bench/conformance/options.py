"""The conformance run's flags, checked before anything starts, and the binaries it needs.

Every mistake here is a usage error (exit 2) naming the flag: a run takes hours, so a bad
regex or duration must not surface only when e2e.test refuses it after a cluster came up.
Focus and skip are Go regular expressions (RE2); Python's `re` checks their syntax, and the
constructs RE2 lacks (lookaround, backreferences) are refused here rather than by e2e.test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from machinery.process import peers
from machinery.process.command import UsageError

DEFAULT_FOCUS = r"\[Conformance\]"
DEFAULT_TIMEOUT = "2h"
CONTENT_TYPES = ("application/json", "application/vnd.kubernetes.protobuf")
KUBECTL = "kubectl.1.33"
"""The e2e kubectl tests shell out to kubectl; it should be the suite's own minor."""
KUBECTL_DIRS = (Path("/usr/lib/google-cloud-sdk/bin"),)
"""Where versioned kubectl binaries live beside gcloud's dispatcher when not on PATH."""
IMAGE_PEERS = ("agnhost", "nonewprivs", "busybox", "sample-apiserver", "etcd")
"""What the image table runs for conformance's images: a run without one would fail its pods
for the wrong reason (busybox would fall back to Debian's, which drops `data-1` variables)."""
BUILD_HINT = "raftkube peers build --only e2e.test,ginkgo," + ",".join(IMAGE_PEERS)

_DURATION = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0}
_NOT_RE2 = re.compile(r"\(\?(?:=|!|<=|<!)|\\[1-9]")


@dataclass(frozen=True)
class Options:
    focus: str
    skip: str | None
    parallel: int
    kubeconfig: Path | None
    """An existing cluster's; None: a fresh `raftkube up` in a temporary data dir."""
    report_dir: Path
    timeout_s: float
    content_type: str
    config: Path
    """The cluster.toml the fresh cluster starts with (as `raftkube up --config`)."""
    pod_network: str = "host"
    """The fresh cluster's (`raftkube up --pod-network`): netns unless asked otherwise or not root,
    since conformance runs replicas that listen on the same port and dials pods by their IPs."""


@dataclass(frozen=True)
class Binaries:
    e2e: Path
    ginkgo: Path | None
    """Only a parallel run needs the ginkgo CLI (it starts and shards the e2e.test processes)."""
    kubectl: Path


def parse_duration(flag: str, text: str) -> float:
    """Seconds in a Go duration (`2h`, `90m`, `1h30m`, `45s`, `1.5h`), as e2e.test's flags
    take them; a bare number is refused (minutes or seconds?)."""
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m["n"]) * _UNIT_S[m["unit"]]
        pos = m.end()
    if not text or pos != len(text):
        raise UsageError(f"{flag} {text!r}: want a duration like 2h, 90m, 1h30m or 45s")
    if total <= 0:
        raise UsageError(f"{flag} {text!r}: must be longer than zero")
    return total


def check_regex(flag: str, pattern: str) -> str:
    """`pattern` if it is a regular expression e2e.test (Go's RE2) will take."""
    if not pattern:
        raise UsageError(f"{flag}: empty regular expression (it would match every spec)")
    try:
        re.compile(pattern)
    except re.error as e:
        raise UsageError(f"{flag} {pattern!r}: not a regular expression: {e}") from None
    if _NOT_RE2.search(pattern):
        raise UsageError(f"{flag} {pattern!r}: lookaround and backreferences are not Go (RE2) regular expressions")
    return pattern


def from_args(args: argparse.Namespace) -> Options:
    focus = check_regex("--focus", args.focus)
    skip = check_regex("--skip", args.skip) if args.skip is not None else None
    if args.parallel < 1:
        raise UsageError(f"--parallel {args.parallel}: want 1 or more processes")
    kubeconfig = args.kubeconfig
    if kubeconfig is not None and not kubeconfig.is_file():
        raise UsageError(f"--kubeconfig {kubeconfig}: no such file")
    if args.content_type not in CONTENT_TYPES:
        raise UsageError(f"--content-type {args.content_type!r}: one of {', '.join(CONTENT_TYPES)}")
    return Options(
        focus=focus,
        skip=skip,
        parallel=args.parallel,
        kubeconfig=kubeconfig.resolve() if kubeconfig is not None else None,
        report_dir=args.report,
        timeout_s=parse_duration("--timeout", args.timeout),
        content_type=args.content_type,
        config=args.config,
        pod_network=args.pod_network or ("netns" if os.geteuid() == 0 else "host"),
    )


def find_kubectl(given: Path | None) -> Path:
    if given is not None:
        if not given.is_file():
            raise UsageError(f"--kubectl {given}: no such file")
        return given
    found = shutil.which(KUBECTL)
    if found:
        return Path(found)
    for folder in KUBECTL_DIRS:
        if (folder / KUBECTL).is_file():
            return folder / KUBECTL
    raise UsageError(
        f"{KUBECTL} is not on PATH (nor in {', '.join(map(str, KUBECTL_DIRS))}): "
        "e2e's kubectl tests need kubectl 1.33; name one with --kubectl"
    )


def find_binaries(parallel: int, kubectl: Path | None) -> Binaries:
    """The built e2e.test (and ginkgo for a parallel run), or a usage error naming the build
    command: a missing peer is never a silent skip."""
    e2e = peers.peer_path("e2e.test")
    ginkgo = peers.peer_path("ginkgo") if parallel > 1 else None
    images = [peers.peer_path(name) for name in IMAGE_PEERS]
    missing = [str(p) for p in (e2e, ginkgo, *images) if p is not None and not p.is_file()]
    if missing:
        raise UsageError(f"not built: {', '.join(missing)}; build with `{BUILD_HINT}`")
    return Binaries(e2e=e2e, ginkgo=ginkgo, kubectl=find_kubectl(kubectl))
