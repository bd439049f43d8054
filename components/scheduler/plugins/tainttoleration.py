"""TaintToleration: a node's NoSchedule and NoExecute taints (the not-ready and unreachable ones
included) keep off every pod that does not tolerate them; its PreferNoSchedule taints only lower
the node's score, by how many of them the pod does not tolerate.  Whether a toleration
tolerates a taint is `machinery.taints.tolerates`, kube's ToleratesTaint."""

from __future__ import annotations

from components.scheduler.nodeinfo import NodeInfo
from components.scheduler.plugins.cycle import CycleState, Status
from machinery.objects import Obj
from machinery.taints import tolerates

NAME = "TaintToleration"
ERR_TAINT = "node(s) had untolerated taint {{{key}: {value}}}"


def tolerations_of(pod: Obj) -> list[Obj]:
    return list((pod.get("spec") or {}).get("tolerations") or ())


def prefer_no_schedule_tolerations(tolerations: list[Obj]) -> list[Obj]:
    """The tolerations that can tolerate a PreferNoSchedule taint (kube's PreScore keeps only
    these, an empty effect included), so the score looks at fewer of them on every node."""
    return [t for t in tolerations if (t.get("effect") or "PreferNoSchedule") == "PreferNoSchedule"]


def taint_toleration(state: CycleState, ni: NodeInfo) -> Status | None:
    for taint in ni.hard_taints:
        if not any(tolerates(t, taint) for t in state.tolerations):
            reason = ERR_TAINT.format(key=taint.get("key", ""), value=taint.get("value", ""))
            return Status(NAME, (reason,), unresolvable=True)
    return None


def intolerable_prefer_no_schedule(state: CycleState, ni: NodeInfo) -> int:
    """The raw score: PreferNoSchedule taints the pod does not tolerate (fewer is better)."""
    tolerations = state.prefer_tolerations
    return sum(1 for taint in ni.soft_taints if not any(tolerates(t, taint) for t in tolerations))
