"""A node as the scheduler sees it: what it offers, and the pods (bound or assumed) that use it.

`NodeInfo.requested` is the sum of the requests of every pod on the node, assumed ones
included, so a pod assumed in one cycle is counted by the next.  Everything a filter or score
needs of a pod is computed once, in `PodInfo.of`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from components.scheduler.resources import (
    ZERO,
    Resources,
    Scalars,
    non_zero_requests,
    pod_requests,
    pods_of,
    resources_of,
)
from machinery.host_ports import host_ports
from machinery.objects import Obj

HOSTNAME_LABEL = "kubernetes.io/hostname"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_SCHEDULER = "default-scheduler"


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def priority_of(pod: Mapping[str, Any]) -> int:
    p = (pod.get("spec") or {}).get("priority")
    return p if isinstance(p, int) and not isinstance(p, bool) else 0


def controller_uid(pod: Mapping[str, Any]) -> str:
    """The UID of the pod's controlling owner (the first owner when none is marked controller)."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or ()
    for o in owners:
        if isinstance(o, dict) and o.get("controller") and isinstance(o.get("uid"), str):
            return str(o["uid"])
    for o in owners:
        if isinstance(o, dict) and isinstance(o.get("uid"), str):
            return str(o["uid"])
    return ""


def _affinity_terms(pod: Mapping[str, Any], kind: str) -> list[Obj]:
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(aff.get("requiredDuringSchedulingIgnoredDuringExecution") or ())


@dataclass(slots=True)
class PodInfo:
    """A pod with what scheduling needs of it, computed once."""

    key: str
    pod: Obj
    namespace: str
    labels: Mapping[str, str]
    priority: int
    requests: Resources
    non_zero: tuple[int, int]
    shape: tuple[
        int, int, int, Scalars, int, int
    ]  # requests (scalars too) and non-zero requests: what the fit memo compares
    ports: list[tuple[str, str, int]]
    affinity: list[Obj]  # required pod affinity terms
    anti_affinity: list[Obj]  # required pod anti-affinity terms
    owner_uid: str

    @classmethod
    def of(cls, pod: Obj) -> PodInfo:
        meta = pod.get("metadata") or {}
        requests, non_zero = pod_requests(pod), non_zero_requests(pod)
        return cls(
            key=pod_key(pod),
            pod=pod,
            namespace=meta.get("namespace") or "",
            labels=meta.get("labels") or {},
            priority=priority_of(pod),
            requests=requests,
            non_zero=non_zero,
            shape=(requests.milli_cpu, requests.memory, requests.ephemeral_storage, requests.scalars, *non_zero),
            ports=host_ports(pod),
            affinity=_affinity_terms(pod, "podAffinity"),
            anti_affinity=_affinity_terms(pod, "podAntiAffinity"),
            owner_uid=controller_uid(pod),
        )


def effective_taints(node: Mapping[str, Any]) -> list[Obj]:
    """The node's taints, plus the one the node lifecycle controller would add for a node that is
    not Ready (not-ready for Ready=False, unreachable for Unknown or no Ready condition)."""
    taints = [t for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, dict)]
    ready = None
    for c in (node.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "Ready":
            ready = c.get("status")
    if ready != "True":
        key = TAINT_NOT_READY if ready == "False" else TAINT_UNREACHABLE
        if not any(t.get("key") == key for t in taints):
            taints.append({"key": key, "effect": "NoSchedule"})
    return taints


@dataclass(slots=True)
class NodeInfo:
    """One node and the pods on it; `requested` and `used_ports` follow `add_pod`/`remove_pod`.

    What the filters read of the node object itself (its taints, whether it is unschedulable)
    is worked out once per node update, not once per pod and node in every cycle.  `fit_memo`
    and `score_memo` keep the last resource verdict and score with the pod shape they were for:
    a cycle binds one pod to one node, so the next pod (usually of the same template) finds
    every other node's answer still good.  Any change to the node or its pods drops them."""

    name: str
    node: Obj
    labels: Mapping[str, str]
    allocatable: Resources
    allowed_pods: int
    unschedulable: bool = False
    hard_taints: tuple[Obj, ...] = ()  # NoSchedule and NoExecute, the not-ready one included
    soft_taints: tuple[Obj, ...] = ()  # PreferNoSchedule (spec.taints only)
    pods: dict[str, PodInfo] = field(default_factory=dict)
    requested: Resources = ZERO
    non_zero_requested: tuple[int, int] = (0, 0)
    used_ports: dict[tuple[str, str, int], int] = field(default_factory=dict)
    pods_with_anti_affinity: int = 0
    owners: dict[str, int] = field(default_factory=dict)  # controller UID -> its pods here
    fit_memo: tuple[Any, Any] | None = None  # (the pod's `shape`, the fit verdict)
    score_memo: tuple[Any, tuple[int, int]] | None = None  # (the pod's non-zero requests, the resource scores)

    @classmethod
    def of(cls, node: Obj, pods: Iterable[PodInfo] = ()) -> NodeInfo:
        info = cls(name="", node={}, labels={}, allocatable=ZERO, allowed_pods=0)
        info.set_node(node)
        for p in pods:
            info.add_pod(p)
        return info

    def set_node(self, node: Obj) -> None:
        meta = node.get("metadata") or {}
        alloc = (node.get("status") or {}).get("allocatable") or {}
        self.name = meta.get("name") or ""
        self.fit_memo = self.score_memo = None
        self.node = node
        self.labels = meta.get("labels") or {}
        self.allocatable = resources_of(alloc)
        self.allowed_pods = pods_of(alloc)
        self.unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        taints = effective_taints(node)
        self.hard_taints = tuple(t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute"))
        self.soft_taints = tuple(t for t in taints if t.get("effect") == "PreferNoSchedule")

    def add_pod(self, pi: PodInfo) -> None:
        if pi.key in self.pods:
            self.remove_pod(pi.key)
        self.fit_memo = self.score_memo = None
        self.pods[pi.key] = pi
        self.requested += pi.requests
        c, m = self.non_zero_requested
        self.non_zero_requested = (c + pi.non_zero[0], m + pi.non_zero[1])
        for port in pi.ports:
            self.used_ports[port] = self.used_ports.get(port, 0) + 1
        if pi.anti_affinity:
            self.pods_with_anti_affinity += 1
        if pi.owner_uid:
            self.owners[pi.owner_uid] = self.owners.get(pi.owner_uid, 0) + 1

    def remove_pod(self, key: str) -> PodInfo | None:
        pi = self.pods.pop(key, None)
        if pi is None:
            return None
        self.fit_memo = self.score_memo = None
        self.requested -= pi.requests
        c, m = self.non_zero_requested
        self.non_zero_requested = (c - pi.non_zero[0], m - pi.non_zero[1])
        for port in pi.ports:
            n = self.used_ports.get(port, 0) - 1
            if n > 0:
                self.used_ports[port] = n
            else:
                self.used_ports.pop(port, None)
        if pi.anti_affinity:
            self.pods_with_anti_affinity -= 1
        if pi.owner_uid:
            left = self.owners.get(pi.owner_uid, 0) - 1
            if left > 0:
                self.owners[pi.owner_uid] = left
            else:
                self.owners.pop(pi.owner_uid, None)
        return pi

    def clone(self) -> NodeInfo:
        return NodeInfo(
            name=self.name,
            node=self.node,
            labels=self.labels,
            allocatable=self.allocatable,
            allowed_pods=self.allowed_pods,
            unschedulable=self.unschedulable,
            hard_taints=self.hard_taints,
            soft_taints=self.soft_taints,
            pods=dict(self.pods),
            requested=self.requested,
            non_zero_requested=self.non_zero_requested,
            used_ports=dict(self.used_ports),
            pods_with_anti_affinity=self.pods_with_anti_affinity,
            owners=dict(self.owners),
        )
