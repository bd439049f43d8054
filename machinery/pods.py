"""What a pod's status says about it, read the one way every reader must agree on.

Whether a pod is ready decides whether an eviction spends a disruption (the apiserver), whether
a budget counts it healthy (the disruption controller), whether a workload counts it available,
and whether a Service routes to it; whether it is being deleted decides whether controllers still
count it.  Each of those places had its own copy of kube's podutil.IsPodReady; this is it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from machinery.objects import Obj, dicts, metadata


def ready_condition(pod: Mapping[str, Any]) -> Obj | None:
    """The pod's Ready condition (the first, as kube's GetPodCondition), None when it has none."""
    for cond in dicts(pod, "status.conditions"):
        if cond.get("type") == "Ready":
            return cond
    return None


def is_ready(pod: Mapping[str, Any]) -> bool:
    """podutil.IsPodReady: the Ready condition is "True" (absent is not ready)."""
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """A deletionTimestamp is set: the pod is going, whatever its phase says."""
    return bool(metadata(pod).get("deletionTimestamp"))
