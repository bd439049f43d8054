"""NodePorts: a pod asking for host ports fits only where no pod already holds one of them
(same port and protocol, and the same host IP or either one 0.0.0.0)."""

from __future__ import annotations

from components.scheduler.nodeinfo import NodeInfo
from components.scheduler.plugins.cycle import CycleState, Status

NAME = "NodePorts"
ERR_PORTS = "node(s) didn't have free ports for the requested pod ports"


def node_ports(state: CycleState, ni: NodeInfo) -> Status | None:
    for ip, proto, port in state.pod.ports:
        for uip, uproto, uport in ni.used_ports:
            if uport == port and uproto == proto and (ip == uip or "0.0.0.0" in (ip, uip)):
                return Status(NAME, (ERR_PORTS,))
    return None
