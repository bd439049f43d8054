"""Builders for pure-core tests."""

from __future__ import annotations

from typing import Any

from components.scheduler.nodeinfo import NodeInfo, PodInfo
from components.scheduler.plugins import pre_filter, run_filters
from machinery.objects import Obj


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110, ready: str = "True", **spec: Any) -> Obj:
    """`extra={"example.com/gpu": "2"}` adds to allocatable; other keywords are the spec's."""
    labels = {"kubernetes.io/hostname": name, **spec.pop("labels", {})}
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), **spec.pop("extra", {})}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": ready}]},
    }


def pod(name: str, cpu: str = "", memory: str = "", ns: str = "default", **spec: Any) -> Obj:
    """`extra={"example.com/gpu": "1"}` adds to the requests; other keywords are the spec's."""
    labels = spec.pop("labels", {"app": name})
    meta: Obj = {"name": name, "namespace": ns, "labels": labels, "uid": f"uid-{name}"}
    if "owner" in spec:
        meta["ownerReferences"] = [{"uid": spec.pop("owner"), "controller": True, "kind": "ReplicaSet", "name": "rs"}]
    if "node_name" in spec:
        spec["nodeName"] = spec.pop("node_name")
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v} | spec.pop("extra", {})
    container: Obj = {"name": "c", "image": "i", "resources": {"requests": requests}}
    if "ports" in spec:
        container["ports"] = spec.pop("ports")
    return {"metadata": meta, "spec": {"containers": [container], **spec}, "status": {}}


def infos(*nodes: Obj, placed: dict[str, list[Obj]] | None = None) -> list[NodeInfo]:
    placed = placed or {}
    return [NodeInfo.of(n, [PodInfo.of(p) for p in placed.get(n["metadata"]["name"], [])]) for n in nodes]


def verdict(p: dict, n: dict, placed: list[dict] | None = None, others: list[NodeInfo] | None = None) -> str:
    """The reasons the default filters give for placing `p` on `n` ("" when it fits)."""
    ni = NodeInfo.of(n, [PodInfo.of(x) for x in placed or []])
    state = pre_filter(PodInfo.of(p), [ni, *(others or [])])
    s = run_filters(state, ni)
    return "" if s is None else "; ".join(s.reasons)
