"""NodeRestriction: what a kubelet (`system:node:<n>` in `system:nodes`) may write, judged on
the bodies (the Node authorizer already judged the URLs).

As kube's plugin: a kubelet writes only its own Node (and may not change its taints, nor set
labels under node-restriction.kubernetes.io or unknown kubernetes.io / k8s.io labels), only
its own Lease in kube-node-lease, only the status of pods bound to it (not their labels), and
deletes only pods bound to it.  It creates only mirror pods: bound to itself, owned by its Node
(controller, right uid), referencing no service account, secret, config map or claim.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.refusal import forbidden
from apiserver.authz.node import LEASE_NAMESPACE, NODE_PREFIX, NODES_GROUP
from machinery.objects import Obj, as_dict, metadata

NodeByName = Callable[[str], Obj | None]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NODE_RESTRICTION_LABELS = "node-restriction.kubernetes.io"
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _spec(obj: Obj | None) -> Obj:
    return as_dict((obj or {}).get("spec"))


def _in_domain(prefix: str, domain: str) -> bool:
    return prefix == domain or prefix.endswith("." + domain)


def forbidden_labels(new: Obj, old: Obj) -> list[str]:
    """The label keys a kubelet added, removed or changed that it may not touch, sorted."""
    changed = {k for k in new.keys() | old.keys() if new.get(k) != old.get(k) or (k in new) != (k in old)}
    out = []
    for key in changed:
        prefix = key.split("/", 1)[0] if "/" in key else ""
        kube_label = _in_domain(prefix, "kubernetes.io") or _in_domain(prefix, "k8s.io")
        if _in_domain(prefix, NODE_RESTRICTION_LABELS) or (kube_label and not _kubelet_label(key, prefix)):
            out.append(key)
    return sorted(out)


def _kubelet_label(key: str, prefix: str) -> bool:
    return key in KUBELET_LABELS or any(_in_domain(prefix, d) for d in KUBELET_LABEL_NAMESPACES)


def _secret_names(spec: Obj) -> Iterator[str]:
    for ref in _list(spec.get("imagePullSecrets")):
        yield str(as_dict(ref).get("name", ""))
    for c in _containers(spec):
        for source in _list(c.get("envFrom")):
            if as_dict(source).get("secretRef") is not None:
                yield "envFrom"
        for env in _list(c.get("env")):
            if as_dict(as_dict(env).get("valueFrom")).get("secretKeyRef") is not None:
                yield "env"
    for vol in _list(spec.get("volumes")):
        vol = as_dict(vol)
        if vol.get("secret") is not None:
            yield "volume"
        for source in _list(as_dict(vol.get("projected")).get("sources")):
            if as_dict(source).get("secret") is not None:
                yield "projected"
        for kind, body in vol.items():
            if isinstance(body, dict) and kind != "projected":
                if body.get("secretRef") is not None or body.get("nodePublishSecretRef") is not None:
                    yield kind


def _configmap_names(spec: Obj) -> Iterator[str]:
    for c in _containers(spec):
        for source in _list(c.get("envFrom")):
            if as_dict(source).get("configMapRef") is not None:
                yield "envFrom"
        for env in _list(c.get("env")):
            if as_dict(as_dict(env).get("valueFrom")).get("configMapKeyRef") is not None:
                yield "env"
    for vol in _list(spec.get("volumes")):
        vol = as_dict(vol)
        if vol.get("configMap") is not None:
            yield "volume"
        for source in _list(as_dict(vol.get("projected")).get("sources")):
            if as_dict(source).get("configMap") is not None:
                yield "projected"


def _containers(spec: Obj) -> Iterator[Obj]:
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for c in _list(spec.get(group)):
            if isinstance(c, dict):
                yield c


class NodeRestriction:
    name = "NodeRestriction"

    def __init__(self, node_by_name: NodeByName) -> None:
        self._node_by_name = node_by_name

    def handles(self, request: AdmissionRequest) -> bool:
        if request.operation == "CONNECT":
            return False  # writes only: what a node may connect to is RBAC's to say
        if NODES_GROUP not in request.user.groups or not request.user.name.startswith(NODE_PREFIX):
            return False
        key = (request.resource.group, request.resource.plural)
        return key in (("", "pods"), ("", "nodes"), ("coordination.k8s.io", "leases"))

    async def validate(self, request: AdmissionRequest) -> None:
        node = request.user.name[len(NODE_PREFIX) :]
        if not node:
            raise forbidden(request, f'could not determine node from user "{request.user.name}"')
        plural = request.resource.plural
        if plural == "pods":
            self._pod(request, node)
        elif plural == "nodes":
            self._node(request, node)
        else:
            self._lease(request, node)

    def _pod(self, request: AdmissionRequest, node: str) -> None:
        sub, op = request.subresource, request.operation
        if sub == "status":
            if op != "UPDATE":
                raise forbidden(request, f'unexpected operation "{op}"')
            if _spec(request.old_object).get("nodeName") != node:
                raise forbidden(
                    request, f'node "{node}" can only update pod status for pods with spec.nodeName set to itself'
                )
            if (metadata(request.object).get("labels") or {}) != (metadata(request.old_object).get("labels") or {}):
                raise forbidden(request, f'node "{node}" cannot update labels through pod status')
            return
        if sub:
            raise forbidden(request, f"unexpected pod subresource \"{sub}\", only 'status' and 'eviction' are allowed")
        if op == "DELETE":
            if _spec(request.old_object).get("nodeName") != node:
                raise forbidden(request, f'node "{node}" can only delete pods with spec.nodeName set to itself')
            return
        if op != "CREATE":
            raise forbidden(
                request, f'unexpected operation "{op}", node "{node}" can only create and delete mirror pods'
            )
        self._mirror_pod(request, node)

    def _mirror_pod(self, request: AdmissionRequest, node: str) -> None:
        pod = request.object or {}
        meta, spec = metadata(pod), _spec(pod)
        if MIRROR_ANNOTATION not in as_dict(meta.get("annotations")):
            raise forbidden(
                request,
                f'pod does not have "{MIRROR_ANNOTATION}" annotation, node "{node}" can only create mirror pods',
            )
        if spec.get("nodeName") != node:
            raise forbidden(request, f'node "{node}" can only create pods with spec.nodeName set to itself')
        owners = _list(meta.get("ownerReferences"))
        if len(owners) > 1:
            raise forbidden(request, f'node "{node}" can only create pods with a single owner reference set to itself')
        owner = as_dict(owners[0]) if owners else None
        if owner is None or (owner.get("apiVersion"), owner.get("kind"), owner.get("name")) != ("v1", "Node", node):
            raise forbidden(request, f'node "{node}" can only create pods with an owner reference set to itself')
        if owner.get("controller") is not True:
            raise forbidden(
                request, f'node "{node}" can only create pods with a controller owner reference set to itself'
            )
        if owner.get("blockOwnerDeletion") is True:
            raise forbidden(request, f'node "{node}" must not set blockOwnerDeletion on an owner reference')
        found = self._node_by_name(node)
        if found is None:
            raise errors.not_found("node", node)
        uid = metadata(found).get("uid")
        if owner.get("uid") != uid:
            raise forbidden(request, f"node {node} UID mismatch: expected {owner.get('uid')} got {uid}")
        if spec.get("serviceAccountName"):
            raise forbidden(request, f'node "{node}" can not create pods that reference a service account')
        if any(True for _ in _secret_names(spec)):
            raise forbidden(request, f'node "{node}" can not create pods that reference secrets')
        if any(True for _ in _configmap_names(spec)):
            raise forbidden(request, f'node "{node}" can not create pods that reference configmaps')
        for vol in _list(spec.get("volumes")):
            for source in _list(as_dict(as_dict(vol).get("projected")).get("sources")):
                if as_dict(source).get("clusterTrustBundle") is not None:
                    raise forbidden(request, f'node "{node}" can not create pods that reference clustertrustbundles')
        if any(as_dict(vol).get("persistentVolumeClaim") is not None for vol in _list(spec.get("volumes"))):
            raise forbidden(request, f'node "{node}" can not create pods that reference persistentvolumeclaims')

    def _node(self, request: AdmissionRequest, node: str) -> None:
        name = request.name or str(metadata(request.object).get("name", ""))
        if name != node:
            raise forbidden(request, f'node "{node}" is not allowed to modify node "{name}"')
        if request.operation == "CREATE":
            if _spec(request.object).get("configSource") is not None:
                raise forbidden(request, f'node "{node}" is not allowed to create pods with a non-nil configSource')
            bad = forbidden_labels(as_dict(metadata(request.object).get("labels")), {})
            if bad:
                raise forbidden(request, f'node "{node}" is not allowed to set the following labels: {", ".join(bad)}')
        elif request.operation == "UPDATE":
            new, old = _spec(request.object), _spec(request.old_object)
            if new.get("configSource") is not None and new.get("configSource") != old.get("configSource"):
                raise forbidden(
                    request, f'node "{node}" is not allowed to update configSource to a new non-nil configSource'
                )
            if (new.get("taints") or []) != (old.get("taints") or []):
                raise forbidden(request, f'node "{node}" is not allowed to modify taints')
            bad = forbidden_labels(
                as_dict(metadata(request.object).get("labels")), as_dict(metadata(request.old_object).get("labels"))
            )
            if bad:
                raise forbidden(request, f"is not allowed to modify labels: {', '.join(bad)}")

    def _lease(self, request: AdmissionRequest, node: str) -> None:
        if request.namespace != LEASE_NAMESPACE:
            raise forbidden(request, f'can only access leases in the "{LEASE_NAMESPACE}" system namespace')
        name = str(metadata(request.object).get("name", "")) if request.operation == "CREATE" else request.name
        if name != node:
            raise forbidden(request, "can only access node lease with the same name as the requesting node")
