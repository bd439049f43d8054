"""The scheduler's cache, pure: nodes and the pods on them, bound or assumed.

`assume(pod, node)` counts the pod on the node at once; `forget` undoes it (binding failed);
`add_pod` of the bound pod from the informer confirms it (on whichever node the server says).
A pod deleted while assumed is removed.  `nodes()` is the snapshot a cycle works on, in a
stable order; it is the cache's own state (cycles are synchronous, nothing changes during one).
"""

from __future__ import annotations

from components.scheduler.nodeinfo import NodeInfo, PodInfo, pod_key
from machinery.objects import Obj


class Cache:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._order: list[NodeInfo] | None = None
        self._pod_node: dict[str, str] = {}  # pod key -> node it is counted on
        self._assumed: set[str] = set()
        self._orphans: dict[str, dict[str, PodInfo]] = {}  # pods bound to nodes we do not know yet

    # -- nodes ----------------------------------------------------------------------------------

    def add_node(self, node: Obj) -> None:
        name = (node.get("metadata") or {}).get("name") or ""
        ni = self._nodes.get(name)
        if ni is None:
            self._nodes[name] = NodeInfo.of(node, self._orphans.pop(name, {}).values())
            self._order = None
        else:
            ni.set_node(node)

    update_node = add_node

    def remove_node(self, name: str) -> None:
        ni = self._nodes.pop(name, None)
        if ni is not None:
            self._order = None
            self._orphans[name] = dict(ni.pods)

    def nodes(self) -> list[NodeInfo]:
        if self._order is None:
            self._order = [self._nodes[n] for n in sorted(self._nodes)]
        return self._order

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    # -- pods -----------------------------------------------------------------------------------

    def assume(self, pod: Obj, node: str) -> None:
        key = pod_key(pod)
        bound = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node}}
        self._place(PodInfo.of(bound), node)
        self._assumed.add(key)

    def forget(self, key: str) -> None:
        if key in self._assumed:
            self._assumed.discard(key)
            self._unplace(key)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    def has_pod(self, key: str) -> bool:
        return key in self._pod_node

    def add_pod(self, pod: Obj) -> None:
        """A bound pod as the server has it (confirms an assumption)."""
        node = (pod.get("spec") or {}).get("nodeName") or ""
        key = pod_key(pod)
        self._assumed.discard(key)
        self._unplace(key)
        self._place(PodInfo.of(pod), node)

    update_pod = add_pod

    def remove_pod(self, key: str) -> None:
        self._assumed.discard(key)
        self._unplace(key)

    def assumed_count(self) -> int:
        return len(self._assumed)

    def _place(self, pi: PodInfo, node: str) -> None:
        self._unplace(pi.key)
        ni = self._nodes.get(node)
        if ni is not None:
            ni.add_pod(pi)
        else:
            self._orphans.setdefault(node, {})[pi.key] = pi
        self._pod_node[pi.key] = node

    def _unplace(self, key: str) -> None:
        node = self._pod_node.pop(key, None)
        if node is None:
            return
        ni = self._nodes.get(node)
        if ni is not None:
            ni.remove_pod(key)
        else:
            self._orphans.get(node, {}).pop(key, None)
