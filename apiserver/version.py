"""`GET /version`: the `version.Info` the apiserver reports.

We claim Kubernetes 1.33.  The number matters beyond display: the gcloud `kubectl` on
this machine is a dispatcher that reads `minor` and runs `kubectl.1.<minor>`, and
kubectl warns when client and server minors are more than one apart.  1.33 is the newest
release our schemas (kubernetes-validate) and tests (kubectl 1.31 to 1.33) cover, so
every tested kubectl is within one minor of it, and the OpenAPI documents are built from
the 1.33 schemas to match.  `gitVersion` says what we really are in its pre-release part.
"""

from __future__ import annotations

import platform
import re
from importlib.metadata import PackageNotFoundError, version

KUBE_MAJOR = "1"
KUBE_MINOR = "33"
# The oldest minor whose clients we promise to serve, as in Kubernetes' compatibility version.
MIN_COMPATIBILITY_MINOR = "32"

_GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "i686": "386"}


def package_version() -> str:
    """raftkube's installed version, or "0.0.0" when running from a bare checkout."""
    try:
        return version("raftkube")
    except PackageNotFoundError:
        return "0.0.0"


def _semver_identifiers(text: str) -> str:
    """Make `text` valid as semver pre-release identifiers (kubectl parses gitVersion as semver)."""
    parts = [re.sub(r"[^0-9A-Za-z-]", "-", p) for p in re.split(r"[.+]", text) if p]
    # numeric identifiers may not have leading zeros
    return ".".join((p.lstrip("0") or "0") if p.isdigit() else p for p in parts) or "0"


def version_info(
    pkg_version: str | None = None,
    git_commit: str = "",
    git_tree_state: str = "",
    build_date: str = "1970-01-01T00:00:00Z",
) -> dict[str, str]:
    """The version.Info JSON.  Unknown build facts stay at the values Go's `version` package
    uses when they are not stamped in (empty commit and tree state, the epoch as build date)."""
    pkg = _semver_identifiers(pkg_version if pkg_version is not None else package_version())
    machine = platform.machine().lower()
    return {
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "emulationMajor": KUBE_MAJOR,
        "emulationMinor": KUBE_MINOR,
        "minCompatibilityMajor": KUBE_MAJOR,
        "minCompatibilityMinor": MIN_COMPATIBILITY_MINOR,
        "gitVersion": f"v{KUBE_MAJOR}.{KUBE_MINOR}.0-raftkube.{pkg}",
        "gitCommit": git_commit,
        "gitTreeState": git_tree_state,
        "buildDate": build_date,
        # Go-shaped fields, answered truthfully for a Python server
        "goVersion": f"python{platform.python_version()}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{platform.system().lower()}/{_GO_ARCH.get(machine, machine)}",
    }
