"""kubectl against Pod Security admission on a real cluster: `kubectl run` in a namespace that
enforces restricted prints kube's Forbidden message; one that warns prints kube's warning."""

from __future__ import annotations

import time

from tests.apiserver.support import ApiserverUnderTest

NAMESPACES = """
apiVersion: v1
kind: Namespace
metadata:
  name: psa-locked
  labels:
    pod-security.kubernetes.io/enforce: restricted
---
apiVersion: v1
kind: Namespace
metadata:
  name: psa-warned
  labels:
    pod-security.kubernetes.io/warn: baseline
"""


def _wait_for_labels(server: ApiserverUnderTest) -> None:
    """Admission reads namespaces from the watch cache; a list (served by it) says when it has them."""
    deadline = time.monotonic() + 30
    while True:
        found = [
            server.ok("get", "namespaces", "-l", f"pod-security.kubernetes.io/{mode}", "-o", "name", minor=31).split()
            for mode in ("enforce", "warn")
        ]
        if "namespace/psa-locked" in found[0] and "namespace/psa-warned" in found[1]:
            return
        assert time.monotonic() < deadline, found
        time.sleep(0.1)


def test_kubectl_run_in_a_restricted_namespace_is_forbidden(raftkube_apiserver: ApiserverUnderTest) -> None:
    server = raftkube_apiserver
    server.ok("apply", "-f", "-", stdin=NAMESPACES, minor=31)
    _wait_for_labels(server)
    refused = server.kubectl("run", "p", "--image=nginx", "-n", "psa-locked", minor=31)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): pods "p" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "p" must set securityContext.allowPrivilegeEscalation=false), '
        'unrestricted capabilities (container "p" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "p" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "p" must set securityContext.seccompProfile.type to "RuntimeDefault" '
        'or "Localhost")'
    )
    warned = server.kubectl("run", "q", "--image=nginx", "--privileged", "-n", "psa-warned", minor=31)
    assert warned.returncode == 0, warned.stderr
    assert warned.stdout.strip() == "pod/q created"
    assert warned.stderr.strip() == (
        'Warning: would violate PodSecurity "baseline:latest": privileged '
        '(container "q" must not set securityContext.privileged=true)'
    )
