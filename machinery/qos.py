"""A pod's quality-of-service class (v1 PodQOSClass), from its containers' cpu and memory.

The class decides which pods the kubelet sacrifices first and which quota scopes
(`BestEffort`/`NotBestEffort`) charge a pod, and it is written into `status.qosClass` by the
apiserver; the kubelet reports it again in the status it writes.  Both must compute the same
class from the same spec, so the rule (component-helpers' qos.GetPodQOS) lives here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from machinery.objects import dicts
from machinery.podresources import container_resources
from machinery.quantity import ZERO

QOS_RESOURCES = ("cpu", "memory")
"""The resources the class is computed from; others (ephemeral-storage, extended) do not count."""


def qos_class(spec: Mapping[str, Any]) -> str:
    """BestEffort without any non-zero cpu/memory request or limit; Guaranteed when every
    container sets non-zero limits on both and its requests (defaulting to the limits) equal them;
    Burstable otherwise.

    Amounts are compared as quantities, not as text: `1` and `1000m` are the same cpu, whether or
    not the apiserver canonicalized them on write (the kubelet computes the class too).  A zero
    amount is as good as none, as kube counts it.  Init containers count as containers do: a pod
    whose init container runs unbounded is not Guaranteed."""
    any_set = False
    guaranteed = True
    for c in dicts(spec, "containers") + dicts(spec, "initContainers"):
        requests = container_resources(c, "requests")
        limits = container_resources(c, "limits")
        for r in QOS_RESOURCES:
            request, limit = requests.get(r), limits.get(r)
            if (request is not None and request > ZERO) or (limit is not None and limit > ZERO):
                any_set = True
            if limit is None or not limit > ZERO or request != limit:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
