"""The built-in resources by name: group, preferred version, plural, kind and scope.

A component that reasons about kinds it does not watch (the quota controller counts
`count/<resource>.<group>` for any namespaced kind) needs to know what the apiserver serves
without importing the apiserver's catalog, which would pull the whole server into the
controller manager.  This is that knowledge as data; tests/machinery/test_resources.py holds it
equal to the apiserver's catalog, so a kind added there without a line here fails a test.
Kinds created at run time (CustomResourceDefinitions) are not here: they are known by asking
the apiserver's discovery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class GroupResource(NamedTuple):
    """A resource without its version (schema.GroupResource): what quota names and RBAC rules
    speak of, since every version serves the same objects."""

    group: str
    plural: str


@dataclass(frozen=True, slots=True)
class BuiltIn:
    """One built-in resource at its preferred version."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def group_resource(self) -> GroupResource:
        return GroupResource(self.group, self.plural)


def _core(plural: str, kind: str, namespaced: bool = True) -> BuiltIn:
    return BuiltIn("", "v1", plural, kind, namespaced)


_ADMISSION = "admissionregistration.k8s.io"
_FLOWCONTROL = "flowcontrol.apiserver.k8s.io"
_STORAGE = "storage.k8s.io"

BUILT_IN: tuple[BuiltIn, ...] = (
    BuiltIn("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False),
    BuiltIn("apiregistration.k8s.io", "v1", "apiservices", "APIService", False),
    _core("componentstatuses", "ComponentStatus", namespaced=False),
    _core("configmaps", "ConfigMap"),
    _core("endpoints", "Endpoints"),
    _core("events", "Event"),
    _core("limitranges", "LimitRange"),
    _core("namespaces", "Namespace", namespaced=False),
    _core("nodes", "Node", namespaced=False),
    _core("persistentvolumeclaims", "PersistentVolumeClaim"),
    _core("persistentvolumes", "PersistentVolume", namespaced=False),
    _core("pods", "Pod"),
    _core("podtemplates", "PodTemplate"),
    _core("replicationcontrollers", "ReplicationController"),
    _core("resourcequotas", "ResourceQuota"),
    _core("secrets", "Secret"),
    _core("serviceaccounts", "ServiceAccount"),
    _core("services", "Service"),
    BuiltIn(_ADMISSION, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
    BuiltIn(_ADMISSION, "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False),
    BuiltIn(_ADMISSION, "v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False),
    BuiltIn(_ADMISSION, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
    BuiltIn("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    BuiltIn("apps", "v1", "daemonsets", "DaemonSet", True),
    BuiltIn("apps", "v1", "deployments", "Deployment", True),
    BuiltIn("apps", "v1", "replicasets", "ReplicaSet", True),
    BuiltIn("apps", "v1", "statefulsets", "StatefulSet", True),
    BuiltIn("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False),
    BuiltIn("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False),
    BuiltIn("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", True),
    BuiltIn("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False),
    BuiltIn("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False),
    BuiltIn("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False),
    BuiltIn("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True),
    BuiltIn("batch", "v1", "cronjobs", "CronJob", True),
    BuiltIn("batch", "v1", "jobs", "Job", True),
    BuiltIn("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False),
    BuiltIn("coordination.k8s.io", "v1", "leases", "Lease", True),
    BuiltIn("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    BuiltIn("events.k8s.io", "v1", "events", "Event", True),
    BuiltIn(_FLOWCONTROL, "v1", "flowschemas", "FlowSchema", False),
    BuiltIn(_FLOWCONTROL, "v1", "prioritylevelconfigurations", "PriorityLevelConfiguration", False),
    BuiltIn("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False),
    BuiltIn("networking.k8s.io", "v1", "ingresses", "Ingress", True),
    BuiltIn("networking.k8s.io", "v1", "ipaddresses", "IPAddress", False),
    BuiltIn("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    BuiltIn("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", False),
    BuiltIn("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    BuiltIn("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    BuiltIn("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    BuiltIn("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    BuiltIn("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    BuiltIn("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    BuiltIn("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    BuiltIn(_STORAGE, "v1", "csidrivers", "CSIDriver", False),
    BuiltIn(_STORAGE, "v1", "csinodes", "CSINode", False),
    BuiltIn(_STORAGE, "v1", "csistoragecapacities", "CSIStorageCapacity", True),
    BuiltIn(_STORAGE, "v1", "storageclasses", "StorageClass", False),
    BuiltIn(_STORAGE, "v1", "volumeattachments", "VolumeAttachment", False),
)

NAMESPACED: dict[GroupResource, BuiltIn] = {r.group_resource: r for r in BUILT_IN if r.namespaced}
"""The namespaced built-in resources by group and plural: what a namespace's quota may count."""

PODS = NAMESPACED[GroupResource("", "pods")]
SERVICES = NAMESPACED[GroupResource("", "services")]
