"""metrics.k8s.io/v1beta1 NodeMetrics and PodMetrics: what `kubectl top` reads.

Never stored: get and list are computed from the kubelets' usage (apiserver/resource_metrics.py),
by the reader the server registers under `ResourceDef.computed`.  kube serves them from
metrics-server, an aggregated API; the objects, the verbs (get, list) and the columns of
`kubectl get nodemetrics` are its.
"""

from __future__ import annotations

from typing import Any

from apiserver.resources.base import Column, ResourceDef
from machinery.objects import Obj

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
_USAGE = {"type": "object", "additionalProperties": {"type": "string"}, "description": "cpu and memory, as quantities"}
_COMMON = {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "timestamp": {"type": "string", "format": "date-time", "description": "the end of the window measured"},
    "window": {"type": "string", "description": "the span the CPU rate was measured over"},
}


def _node_row(obj: Obj, now: float) -> list[Any]:
    usage = obj.get("usage") or {}
    return [usage.get("cpu", ""), usage.get("memory", ""), obj.get("window", "")]


def _pod_row(obj: Obj, now: float) -> list[Any]:
    return [len(obj.get("containers") or ()), obj.get("window", "")]


RESOURCES = (
    ResourceDef(
        group=GROUP,
        version=VERSION,
        kind="NodeMetrics",
        plural="nodes",
        singular="",
        namespaced=False,
        verbs=("get", "list"),
        computed="nodemetrics",
        columns=(Column("CPU"), Column("Memory"), Column("Window")),
        row=_node_row,
        openapi_schema={"type": "object", "properties": {**_COMMON, "usage": _USAGE}},
    ),
    ResourceDef(
        group=GROUP,
        version=VERSION,
        kind="PodMetrics",
        plural="pods",
        singular="",
        namespaced=True,
        verbs=("get", "list"),
        computed="podmetrics",
        columns=(Column("Containers", type="integer"), Column("Window")),
        row=_pod_row,
        openapi_schema={
            "type": "object",
            "properties": {
                **_COMMON,
                "containers": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "usage": _USAGE},
                    },
                },
            },
        },
    ),
)
