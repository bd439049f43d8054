"""Pods as the workload controllers see them: selectors, ownership, readiness, availability, and
the order in which a controller gives pods up (kube's `ActivePodsWithRanks`).

Pure functions over the JSON objects the informers hold; `now` is wall-clock seconds (epoch),
passed in so that tests decide it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from machinery.objects import Obj, metadata, spec, status
from machinery.pods import is_ready, ready_condition
from machinery.selectors import label_selector_matches
from machinery.timestamps import parse_time

POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


# -- selectors ------------------------------------------------------------------------------


def selector_matches(selector: Any, obj_labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels; an empty or missing selector matches nothing
    (the workload controllers' rule: a selector-less workload owns no pods).  The matching
    itself is the machinery's (`machinery.selectors.label_selector_matches`)."""
    if not isinstance(selector, dict):
        return False
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return False
    return label_selector_matches(selector, obj_labels)


# -- ownership ------------------------------------------------------------------------------


def owner_ref(owner: Mapping[str, Any], kind: str, api_version: str) -> Obj:
    """The ownerReference a controller sets on what it makes or adopts (`api_version` the
    owner's: the garbage collector finds the owner by it)."""
    m = metadata(owner)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": m.get("name"),
        "uid": m.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


# -- pod state ------------------------------------------------------------------------------


def is_active(pod: Mapping[str, Any]) -> bool:
    """Neither finished nor being deleted (kube's FilterActivePods)."""
    return status(pod).get("phase") not in ("Succeeded", "Failed") and not metadata(pod).get("deletionTimestamp")


def ready_since(pod: Mapping[str, Any]) -> float | None:
    cond = ready_condition(pod)
    if cond is None or cond.get("status") != "True":
        return None
    return parse_time(cond.get("lastTransitionTime"))


def is_available(pod: Mapping[str, Any], min_ready_seconds: int, now: float) -> bool:
    """Ready for at least `min_ready_seconds` (kube's IsPodAvailable)."""
    if not is_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = ready_since(pod)
    return since is not None and since + min_ready_seconds <= now


def available_in(pod: Mapping[str, Any], min_ready_seconds: int, now: float) -> float | None:
    """Seconds until a ready pod becomes available (None when not ready or already available)."""
    since = ready_since(pod)
    if since is None or min_ready_seconds <= 0:
        return None
    left = since + min_ready_seconds - now
    return left if left > 0 else None


def restarts(pod: Mapping[str, Any]) -> int:
    return sum(
        int(c.get("restartCount") or 0) for c in status(pod).get("containerStatuses") or () if isinstance(c, dict)
    )


def deletion_cost(pod: Mapping[str, Any]) -> int:
    raw = (metadata(pod).get("annotations") or {}).get(POD_DELETION_COST)
    try:
        return int(raw) if raw is not None else 0
    except (TypeError, ValueError):
        return 0


def _log_age(ts: float | None, now: float) -> float:
    """A timestamp's age bucketed logarithmically (kube's LogarithmicScaleDown: pods of similar
    age rank as equals); a missing time counts as the newest."""
    if ts is None:
        return -1.0
    return float(math.floor(math.log2(max(now - ts, 0.0) + 1.0)))


def deletion_order_key(pod: Obj, rank: int, now: float) -> tuple[Any, ...]:
    """Sort key: pods that sort first are deleted first (kube's ActivePodsWithRanks.Less):
    unassigned < assigned; Pending < Unknown < Running; not ready < ready; lower
    pod-deletion-cost first; more related pods on the same node first; ready more recently
    first; more restarts first; created more recently first (ages bucketed by log2, as with
    LogarithmicScaleDown); the UID breaks remaining ties so that the order is total."""
    node = spec(pod).get("nodeName")
    ready = is_ready(pod)
    return (
        1 if node else 0,
        _PHASE_RANK.get(str(status(pod).get("phase")), 0),
        1 if ready else 0,
        deletion_cost(pod),
        -rank,
        _log_age(ready_since(pod), now) if ready else 0.0,
        -restarts(pod),
        _log_age(parse_time(metadata(pod).get("creationTimestamp")), now),
        str(metadata(pod).get("uid") or ""),
    )


def pods_to_delete(pods: list[Obj], related: Iterable[Obj], count: int, now: float) -> list[Obj]:
    """The `count` pods to give up first; `related` are the active pods of every workload with the
    same controlling owner (a Deployment's replicasets), used to rank doubled-up nodes first."""
    if count >= len(pods):
        return list(pods)
    on_node: dict[str, int] = {}
    for p in related:
        if is_active(p):
            node = str(spec(p).get("nodeName") or "")
            on_node[node] = on_node.get(node, 0) + 1
    ranked = sorted(pods, key=lambda p: deletion_order_key(p, on_node.get(str(spec(p).get("nodeName") or ""), 0), now))
    return ranked[:count]
