"""NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only pods that tolerate the
`node.kubernetes.io/unschedulable:NoSchedule` taint kube puts on it."""

from __future__ import annotations

from components.scheduler.nodeinfo import NodeInfo
from components.scheduler.plugins.cycle import CycleState, Status
from machinery.taints import tolerates

NAME = "NodeUnschedulable"
ERR_UNSCHEDULABLE = "node(s) were unschedulable"  # kube-scheduler's words: users grep events for them
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_TAINT = {"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}


def node_unschedulable(state: CycleState, ni: NodeInfo) -> Status | None:
    if not ni.unschedulable:
        return None
    if any(tolerates(t, _TAINT) for t in state.tolerations):
        return None
    return Status(NAME, (ERR_UNSCHEDULABLE,), unresolvable=True)
