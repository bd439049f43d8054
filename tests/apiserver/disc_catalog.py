"""A resource catalog for the discovery and OpenAPI tests, independent of the real resource modules."""

from __future__ import annotations

from apiserver.http.subresources.binding import BindingHandler
from apiserver.http.subresources.eviction import EvictionHandler
from apiserver.http.subresources.kubelet import PodLogHandler
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.http.subresources.scale import ScaleHandler
from apiserver.http.subresources.token import TokenRequestHandler
from apiserver.resources.base import ResourceDef, Subresource

STATUS = ("get", "patch", "update")


def _status(kind: str) -> Subresource:
    return Subresource("status", kind, verbs=STATUS, handler=STATUS_VIEW)


def _scale() -> Subresource:
    return Subresource("scale", "Scale", "autoscaling", "v1", STATUS, handler=ScaleHandler())


PODS = ResourceDef(
    "",
    "v1",
    "Pod",
    "pods",
    "pod",
    True,
    ("po",),
    ("all",),
    subresources=(
        _status("Pod"),
        Subresource("eviction", "Eviction", "policy", "v1", ("create",), handler=EvictionHandler()),
        Subresource("binding", "Binding", verbs=("create",), handler=BindingHandler()),
        Subresource("log", "Pod", verbs=("get",), handler=PodLogHandler()),
    ),
)
NODES = ResourceDef("", "v1", "Node", "nodes", "node", False, ("no",), subresources=(_status("Node"),))
NAMESPACES = ResourceDef(
    "",
    "v1",
    "Namespace",
    "namespaces",
    "namespace",
    False,
    ("ns",),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    subresources=(_status("Namespace"),),
)
CONFIGMAPS = ResourceDef("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",))
EVENTS = ResourceDef("", "v1", "Event", "events", "event", True, ("ev",))
SERVICEACCOUNTS = ResourceDef(
    "",
    "v1",
    "ServiceAccount",
    "serviceaccounts",
    "serviceaccount",
    True,
    ("sa",),
    subresources=(
        Subresource("token", "TokenRequest", "authentication.k8s.io", "v1", ("create",), handler=TokenRequestHandler()),
    ),
)
DEPLOYMENTS = ResourceDef(
    "apps",
    "v1",
    "Deployment",
    "deployments",
    "deployment",
    True,
    ("deploy",),
    ("all",),
    subresources=(_scale(), _status("Deployment")),
)
REPLICASETS = ResourceDef(
    "apps", "v1", "ReplicaSet", "replicasets", "replicaset", True, ("rs",), ("all",), subresources=(_scale(),)
)
NEW_EVENTS = ResourceDef("events.k8s.io", "v1", "Event", "events", "event", True, ("ev",), store_as="events")
HPA_V2 = ResourceDef(
    "autoscaling",
    "v2",
    "HorizontalPodAutoscaler",
    "horizontalpodautoscalers",
    "horizontalpodautoscaler",
    True,
    ("hpa",),
)
HPA_V1 = ResourceDef(
    "autoscaling",
    "v1",
    "HorizontalPodAutoscaler",
    "horizontalpodautoscalers",
    "horizontalpodautoscaler",
    True,
    ("hpa",),
)
JOBS = ResourceDef("batch", "v1", "Job", "jobs", "job", True, (), ("all",), subresources=(_status("Job"),))
LEASES = ResourceDef("coordination.k8s.io", "v1", "Lease", "leases", "lease", True)
# a kind Kubernetes publishes no schema for
WIDGETS = ResourceDef(
    "example.com", "v1alpha1", "Widget", "widgets", "widget", False, ("wd",), subresources=(_status("Widget"),)
)

# deliberately not in discovery order
CATALOG: tuple[ResourceDef, ...] = (
    WIDGETS,
    JOBS,
    HPA_V1,
    DEPLOYMENTS,
    NEW_EVENTS,
    PODS,
    LEASES,
    NODES,
    HPA_V2,
    NAMESPACES,
    CONFIGMAPS,
    REPLICASETS,
    EVENTS,
    SERVICEACCOUNTS,
)
