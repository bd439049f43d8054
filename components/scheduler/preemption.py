"""Preemption, pure: which lower-priority pods to evict, and from which node, so the pod fits.

kube's default preemption: only nodes whose rejection was not `unresolvable` are candidates;
on each, remove every pod of lower priority; if the pod then fits, give back as many as
possible (most important first) while it still fits; the rest are the victims.  The node
chosen has the lowest highest-victim priority, then the lowest sum of victim priorities,
then the fewest victims.  Each victim is marked a DisruptionTarget before it is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from components.scheduler.framework import Algorithm, Diagnosis, FitError
from components.scheduler.nodeinfo import DEFAULT_SCHEDULER, NodeInfo, PodInfo
from components.scheduler.plugins import pre_filter
from components.scheduler.plugins.cycle import Status
from machinery.objects import Obj

NOT_HELPFUL = "Preemption is not helpful for scheduling"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[PodInfo, ...]


def _terminating(pi: PodInfo) -> bool:
    return bool((pi.pod.get("metadata") or {}).get("deletionTimestamp"))


def ineligible(pi: PodInfo, nodes: Sequence[NodeInfo]) -> str:
    """Why the pod may not preempt ("" when it may)."""
    if (pi.pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return NEVER
    nominated = (pi.pod.get("status") or {}).get("nominatedNodeName")
    if nominated:
        for ni in nodes:
            if ni.name == nominated and any(_terminating(p) and p.priority < pi.priority for p in ni.pods.values()):
                return TERMINATING
    return ""


def disruption_condition(victim: Obj, preemptor: Obj, now: str) -> Obj | None:
    """The DisruptionTarget condition kube's scheduler sets on a victim before deleting it (so
    its owner and the kubelet can tell a preemption from any other deletion), or None when the
    victim already says so."""
    for c in (victim.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == DISRUPTION_TARGET and c.get("status") == "True":
            if c.get("reason") == PREEMPTION_BY_SCHEDULER:
                return None
    scheduler = (preemptor.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER
    return {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": f"{scheduler}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": now,
        "lastProbeTime": None,
    }


def _start_time(pi: PodInfo) -> str:
    started = (pi.pod.get("status") or {}).get("startTime")
    return str(started or (pi.pod.get("metadata") or {}).get("creationTimestamp") or "")


def select_victims_on_node(
    alg: Algorithm, pi: PodInfo, nodes: Sequence[NodeInfo], index: int
) -> tuple[list[PodInfo] | None, Status | None]:
    ni = nodes[index].clone()
    potential = [p for p in ni.pods.values() if p.priority < pi.priority]
    if not potential:
        return None, Status("DefaultPreemption", (NO_VICTIMS,), unresolvable=True)
    for p in potential:
        ni.remove_pod(p.key)
    view = [*nodes[:index], ni, *nodes[index + 1 :]]

    def fits() -> Status | None:
        return alg.filter_node(pre_filter(pi, view, alg.namespace_labels), ni)

    status = fits()
    if status is not None:
        return None, status
    # most important first: higher priority, then the longer running
    potential.sort(key=lambda p: (-p.priority, _start_time(p)))
    victims = []
    for p in potential:
        ni.add_pod(p)
        if fits() is not None:
            ni.remove_pod(p.key)
            victims.append(p)
    return victims, None


def preempt(
    alg: Algorithm, pi: PodInfo, nodes: Sequence[NodeInfo], fit_error: FitError
) -> tuple[Candidate | None, str]:
    """The chosen candidate, or None and the PostFilter message ("preemption: ...")."""
    why = ineligible(pi, nodes)
    if why:
        return None, f"preemption: {why}"
    statuses: dict[str, Status] = {}
    candidates: list[Candidate] = []
    by_name: Mapping[str, Status] = fit_error.diagnosis.node_to_status
    for i, ni in enumerate(nodes):
        rejected = by_name.get(ni.name)
        if rejected is None or rejected.unresolvable:
            statuses[ni.name] = Status("DefaultPreemption", (NOT_HELPFUL,), unresolvable=True)
            continue
        victims, status = select_victims_on_node(alg, pi, nodes, i)
        if victims is None:
            assert status is not None
            statuses[ni.name] = status
        else:
            candidates.append(Candidate(ni.name, tuple(victims)))
    if not candidates:
        inner = FitError(pi, len(nodes), Diagnosis(node_to_status=statuses))
        return None, f"preemption: {inner.message()}"

    def rank(c: Candidate) -> tuple[int, int, int]:
        prios = [v.priority for v in c.victims]
        return (max(prios, default=-(2**31)), sum(prios), len(prios))

    return min(candidates, key=rank), ""
