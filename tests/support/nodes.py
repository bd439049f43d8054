"""What a test waits for before it counts on a node: Ready, and schedulable."""

from __future__ import annotations

from typing import Any


def schedulable(node: dict[str, Any]) -> bool:
    """Ready and without a NoSchedule or NoExecute taint, as e2e's WaitForAllNodesSchedulable
    waits for nodes: a new node is tainted not-ready until the node lifecycle controller sees
    it Ready, a moment after its kubelet said so.  A test that spread pods in that moment found
    them all on the other node (clean run 72)."""
    conditions = node.get("status", {}).get("conditions") or ()
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = node.get("spec", {}).get("taints") or ()
    return ready and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints)
