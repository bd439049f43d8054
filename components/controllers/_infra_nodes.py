"""The node lifecycle controller's decisions, pure: a silent node's conditions, the taints a
node's Ready condition calls for, and when a pod on a NoExecute-tainted node is evicted."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from machinery.objects import Obj
from machinery.taints import tolerates

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
MANAGED = (NOT_READY, UNREACHABLE)
UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
SILENCED = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


def condition(node: Mapping[str, Any], kind: str = "Ready") -> Obj | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind:
            return c
    return None


def silenced(conditions: Iterable[Mapping[str, Any]], now: str) -> list[Obj]:
    """The conditions of a node whose kubelet went quiet: Ready and the pressures Unknown."""
    out: list[Obj] = []
    seen = set()
    for c in conditions:
        c = dict(c)
        if c.get("type") in SILENCED:
            seen.add(c["type"])
            if c.get("status") != "Unknown":
                c["lastTransitionTime"] = now
            c.update(status="Unknown", reason=UNKNOWN_REASON, message=UNKNOWN_MESSAGE)
        out.append(c)
    if "Ready" not in seen:
        out.append(
            {
                "type": "Ready",
                "status": "Unknown",
                "reason": "NodeStatusNeverUpdated",
                "message": "Kubelet never posted node status.",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        )
    return out


def wanted_taints(taints: Iterable[Mapping[str, Any]], ready: str | None, now: str) -> list[Obj]:
    """The node's taints with the controller's own set for its Ready status (False: not-ready,
    Unknown: unreachable; each NoExecute with timeAdded, and NoSchedule); other taints, and
    taints still wanted (their timeAdded), are kept.  No Ready condition yet: unchanged."""
    held = [dict(t) for t in taints]
    if ready is None:
        return held
    key = {"False": NOT_READY, "Unknown": UNREACHABLE}.get(ready)
    out = [t for t in held if t.get("key") not in MANAGED or t.get("key") == key]
    if key is not None:
        for effect in ("NoExecute", "NoSchedule"):
            if not any(t.get("key") == key and t.get("effect") == effect for t in out):
                out.append({"key": key, "effect": effect, **({"timeAdded": now} if effect == "NoExecute" else {})})
    return out


def eviction_at(pod: Mapping[str, Any], tainted: Iterable[tuple[Mapping[str, Any], float]]) -> float | None:
    """When the pod goes, given its node's NoExecute taints and when each was first seen: at once
    for a taint it does not tolerate, else after its shortest `tolerationSeconds` for it (kube's
    taint manager); None when it tolerates every taint for ever."""
    tolerations = [t for t in (pod.get("spec") or {}).get("tolerations") or [] if isinstance(t, Mapping)]
    at: float | None = None
    for taint, seen in tainted:
        matching = [t for t in tolerations if tolerates(t, taint)]
        if not matching:
            return seen
        seconds = [max(0, int(t["tolerationSeconds"])) for t in matching if t.get("tolerationSeconds") is not None]
        if seconds:
            when = seen + min(seconds)
            at = when if at is None else min(at, when)
    return at
