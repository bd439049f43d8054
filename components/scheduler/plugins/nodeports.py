"""NodePorts: a pod asking for host ports fits only where no pod already holds one of them
(machinery.host_ports says when two collide)."""

from __future__ import annotations

from components.scheduler.nodeinfo import NodeInfo
from components.scheduler.plugins.cycle import CycleState, Status
from machinery.host_ports import NO_FREE_PORTS, first_collision

NAME = "NodePorts"
ERR_PORTS = NO_FREE_PORTS


def node_ports(state: CycleState, ni: NodeInfo) -> Status | None:
    if first_collision(state.pod.ports, ni.used_ports) is not None:
        return Status(NAME, (ERR_PORTS,))
    return None
