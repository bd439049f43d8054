"""A pod's quality-of-service class (v1 PodQOSClass), from its containers' cpu and memory.

The class decides which pods the kubelet sacrifices first and which quota scopes
(`BestEffort`/`NotBestEffort`) charge a pod, and it is written into `status.qosClass` by the
apiserver; the kubelet reports it again in the status it writes.  Both must compute the same
class from the same spec, so the rule (component-helpers' qos.GetPodQOS) lives here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from machinery.objects import dicts, mapping

QOS_RESOURCES = ("cpu", "memory")
"""The resources the class is computed from; others (ephemeral-storage, extended) do not count."""


def qos_class(spec: Mapping[str, Any]) -> str:
    """BestEffort without any cpu/memory request or limit; Guaranteed when every container limits
    both and requests (defaulting to the limits) equal them; Burstable otherwise.

    Init containers count as containers do: a pod whose init container runs unbounded is not
    Guaranteed."""
    containers = dicts(spec, "containers") + dicts(spec, "initContainers")
    any_set = False
    guaranteed = True
    for c in containers:
        requests = mapping(c, "resources.requests")
        limits = mapping(c, "resources.limits")
        if any(r in requests or r in limits for r in QOS_RESOURCES):
            any_set = True
        for r in QOS_RESOURCES:
            if r not in limits or requests.get(r, limits[r]) != limits[r]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
