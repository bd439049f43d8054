"""The test namespaces a conformance run leaves behind, found and deleted.

Each e2e spec makes its namespace `<base>-<n>` (the framework's base name, then a random
number below 10,000: test/e2e/framework `RandomSuffix`), and deletes it when the spec ends;
a spec cut short (a timeout, a killed run) leaves it.  Only namespaces that did not exist
before the run and have that shape are deleted: a user's own namespaces on a cluster given
by --kubeconfig are never touched.  kubectl does the talking, with the run's kubeconfig,
so whatever credentials it holds work as they do for e2e.test.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

E2E_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?-\d{1,4}$")
KUBECTL_TIMEOUT_S = 60.0


class NamespaceError(Exception):
    """kubectl could not list or delete namespaces (printed as a warning: the run's results stand)."""


def left_by_run(before: Iterable[str], after: Iterable[str]) -> list[str]:
    """The e2e namespaces in `after` that were not in `before`."""
    old = set(before)
    return sorted(n for n in set(after) - old if E2E_NAMESPACE.match(n))


def _kubectl(kubectl: Path, kubeconfig: Path, *args: str) -> str:
    try:
        proc = subprocess.run(
            [str(kubectl), f"--kubeconfig={kubeconfig}", "--request-timeout=30s", *args],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NamespaceError(f"kubectl {args[0]}: {e}") from None
    if proc.returncode != 0:
        raise NamespaceError(f"kubectl {' '.join(args[:2])}: {proc.stderr.strip()[:300]}")
    return proc.stdout


def names(kubectl: Path, kubeconfig: Path) -> set[str]:
    out = _kubectl(kubectl, kubeconfig, "get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}")
    return set(out.split())


def delete(kubectl: Path, kubeconfig: Path, doomed: list[str]) -> None:
    """Ask for their deletion without waiting (namespaces terminate in the background)."""
    if doomed:
        _kubectl(kubectl, kubeconfig, "delete", "namespace", "--wait=false", "--ignore-not-found", *doomed)
