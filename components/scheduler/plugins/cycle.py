"""What every plugin shares: the `Status` a filter answers with, the `CycleState` one pod's
cycle computes once (kube-scheduler's CycleState, written by the PreFilter of each plugin) and
the score scale.

A filter is a pure function of the cycle's state and one node; its verdict is None (the node
can take the pod) or a `Status`.  `unresolvable` marks kube's UnschedulableAndUnresolvable:
evicting pods from that node cannot help, so preemption skips it.

The state is a plain dataclass with one field per plugin's pre-computed part rather than kube's
map keyed by plugin name: filters read it for every node of every cycle, and an attribute is
the cheapest read Python has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from components.scheduler.nodeinfo import NodeInfo, PodInfo
from machinery.objects import Obj

if TYPE_CHECKING:  # each plugin's part of the state is its own business (and imports this module)
    from components.scheduler.plugins.interpodaffinity import AffinityState
    from components.scheduler.plugins.podtopologyspread import SpreadState

MAX_NODE_SCORE = 100  # kube's framework.MaxNodeScore: every score is normalised to 0..100


@dataclass(frozen=True, slots=True)
class Status:
    """Why one node cannot take the pod."""

    plugin: str
    reasons: tuple[str, ...]
    unresolvable: bool = False


Filter = Callable[["CycleState", NodeInfo], "Status | None"]


@dataclass(slots=True)
class CycleState:
    """What the filters and scores of one pod share, computed once per cycle from every node.

    `filters` are the ones that can reject this pod somewhere: a pod without host ports, node
    selectors, spread constraints or affinity skips those filters on every node (a cycle runs
    them on hundreds of nodes, so a call that can only say yes is the cost that matters)."""

    pod: PodInfo
    tolerations: list[Obj]
    prefer_tolerations: list[Obj]  # the tolerations that count against PreferNoSchedule taints
    filters: tuple[Filter, ...]
    spread: SpreadState
    affinity: AffinityState
