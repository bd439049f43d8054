"""Which nodes a DaemonSet's pod belongs on, and the pod it puts there (kube's daemon util).

A node should run the daemon pod when the template's nodeName (if any) is the node, its
nodeSelector and required node affinity select the node, and it tolerates every NoSchedule
and NoExecute taint of the node; a pod already there should keep running while it tolerates
the NoExecute ones.  Daemon pods tolerate what kube adds to every daemon pod (a node not
ready, unreachable, under disk/memory/PID pressure or cordoned; a network not ready, for
host-network pods), so a cordoned node keeps its daemons.

The pod names its node by required node affinity (`matchFields` on `metadata.name`) and is
placed by the scheduler, as kube's daemon controller does since 1.12.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from machinery.objects import Obj, labels, metadata, spec
from machinery.selectors import node_selector_term_matches
from machinery.taints import tolerates

_NO_EXECUTE = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_NO_SCHEDULE = (
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/unschedulable",
)
NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"


def daemon_tolerations(pod_spec: Mapping[str, Any]) -> list[Obj]:
    """The template's tolerations plus kube's daemon ones it lacks (AddOrUpdateDaemonPodTolerations)."""
    tolerations = [t for t in copy.deepcopy(pod_spec.get("tolerations") or []) if isinstance(t, dict)]
    wanted = [{"key": k, "operator": "Exists", "effect": "NoExecute"} for k in _NO_EXECUTE]
    wanted += [{"key": k, "operator": "Exists", "effect": "NoSchedule"} for k in _NO_SCHEDULE]
    if pod_spec.get("hostNetwork"):
        wanted.append({"key": NETWORK_UNAVAILABLE, "operator": "Exists", "effect": "NoSchedule"})
    for toleration in wanted:
        if not any(t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"] for t in tolerations):
            tolerations.append(toleration)
    return tolerations


def _untolerated(taints: list[Any], tolerations: list[Obj], effects: tuple[str, ...]) -> bool:
    return any(
        isinstance(t, dict) and t.get("effect") in effects and not any(tolerates(tol, t) for tol in tolerations)
        for t in taints
    )


def _affinity_selects(pod_spec: Mapping[str, Any], node: Obj) -> bool:
    node_labels, name = labels(node), str(metadata(node).get("name") or "")
    selector = pod_spec.get("nodeSelector") or {}
    if isinstance(selector, dict) and any(node_labels.get(k) != v for k, v in selector.items()):
        return False
    required = (
        ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    ) or {}
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if terms:
        return any(node_selector_term_matches(t, node_labels, name) for t in terms)
    return True


def placement(ds: Obj, node: Obj) -> tuple[bool, bool]:
    """(should run a daemon pod, should keep running one already there)."""
    pod_spec = (spec(ds).get("template") or {}).get("spec") or {}
    wanted_node = pod_spec.get("nodeName")
    if wanted_node and wanted_node != metadata(node).get("name"):
        return False, False
    if not _affinity_selects(pod_spec, node):
        return False, False
    taints = list(spec(node).get("taints") or [])
    tolerations = daemon_tolerations(pod_spec)
    if _untolerated(taints, tolerations, ("NoSchedule", "NoExecute")):
        return False, not _untolerated(taints, tolerations, ("NoExecute",))
    return True, True


def node_of(pod: Obj) -> str:
    """The node a daemon pod is on, or is meant for while unscheduled (its affinity's node name)."""
    name = spec(pod).get("nodeName")
    if name:
        return str(name)
    required = (
        ((spec(pod).get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    ) or {}
    for term in required.get("nodeSelectorTerms") or () if isinstance(required, dict) else ():
        for field in term.get("matchFields") or () if isinstance(term, dict) else ():
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and field.get("values"):
                return str(field["values"][0])
    return ""


def pod_spec_for(ds: Obj, node_name: str) -> Obj:
    """The template's pod spec bound to `node_name` (its required node affinity replaced by one
    term naming the node, preferred terms kept) with the daemon tolerations."""
    pod_spec = copy.deepcopy((spec(ds).get("template") or {}).get("spec") or {})
    found = pod_spec.get("affinity")
    affinity: Obj = found if isinstance(found, dict) else {}
    found = affinity.get("nodeAffinity")
    node_affinity: Obj = found if isinstance(found, dict) else {}
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]
    }
    affinity["nodeAffinity"] = node_affinity
    pod_spec["affinity"] = affinity
    pod_spec["tolerations"] = daemon_tolerations(pod_spec)
    return pod_spec
