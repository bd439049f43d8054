"""What an ephemeral container may not set (kube's EphemeralContainerCommon fields outside
allowedEphemeralContainerFields).

An ephemeral container is a debugging aid added to a running pod: it must not be relied upon for
the pod's service, so it has no ports, probes, lifecycle hooks or resources.  The apiserver
refuses a write that sets one (422 naming the field) and the kubelet drops them from what it
runs (it does not rely on the apiserver for that); both read the list here.
"""

from __future__ import annotations

FORBIDDEN_FIELDS: tuple[str, ...] = (
    "ports",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
)
