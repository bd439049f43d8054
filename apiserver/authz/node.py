"""The Node authorizer: what a kubelet (`system:node:<name>` in `system:nodes`) may do.

Kube's rule, as the issue states it: a kubelet may touch only its own Node, its own Lease and
the pods bound to it, and read only the secrets, config maps, claims and service accounts
that those pods use, and the volumes bound to those claims.  The relationships are read from
the pods (and claims) watch caches on each request (no separate graph to keep in step).
Requests of anyone else, and kubelet requests this authorizer does not decide, get no
opinion, so RBAC still decides them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from apiserver.authz.attributes import Attributes
from apiserver.authz.interface import NO_OPINION, Decision, Verdict

NODES_GROUP = "system:nodes"
NODE_PREFIX = "system:node:"
LEASE_NAMESPACE = "kube-node-lease"
Obj = Mapping[str, Any]
# every pod the node runs (the pods whose spec.nodeName is that node)
PodsOnNode = Callable[[str], Iterable[Obj]]
# one pod, by namespace and name, or None
PodByName = Callable[[str, str], Obj | None]

_ALLOW = Verdict(Decision.ALLOW)
_READ = ("get", "list", "watch")
_REFERENCED = {"secrets", "configmaps", "persistentvolumeclaims", "serviceaccounts"}


def node_of(attrs: Attributes) -> str | None:
    user = attrs.user
    if NODES_GROUP in user.groups and user.name.startswith(NODE_PREFIX):
        return user.name[len(NODE_PREFIX) :] or None
    return None


def _deny(why: str) -> Verdict:
    return Verdict(Decision.DENY, why)


class NodeAuthorizer:
    def __init__(
        self, pods_on_node: PodsOnNode, pod_by_name: PodByName, claim_by_name: PodByName | None = None
    ) -> None:
        self._pods_on_node = pods_on_node
        self._pod_by_name = pod_by_name
        self._claim_by_name = claim_by_name  # (namespace, name) -> the claim (persistent volumes)

    def authorize(self, attrs: Attributes) -> Verdict:
        node = node_of(attrs)
        if node is None or not attrs.resource_request:
            return NO_OPINION
        group, resource, sub = attrs.api_group, attrs.resource, attrs.subresource
        if group == "" and resource == "nodes":
            return self._nodes(attrs, node)
        if group == "" and resource == "pods":
            return self._pods(attrs, node)
        if group == "coordination.k8s.io" and resource == "leases":
            return self._lease(attrs, node)
        if group == "" and resource in _REFERENCED:
            if resource == "serviceaccounts" and sub == "token":
                return self._referenced(attrs, node, "create")
            if sub:
                return NO_OPINION
            return self._referenced(attrs, node, "get", "list", "watch")
        if group == "" and resource == "persistentvolumes" and not sub and attrs.verb == "get":
            return self._volume(attrs, node)
        if group in ("", "events.k8s.io") and resource == "events" and attrs.verb in ("create", "patch", "update"):
            return _ALLOW
        if group == "" and resource in ("services", "endpoints") and not sub and attrs.verb in _READ:
            return _ALLOW
        return NO_OPINION

    def _nodes(self, attrs: Attributes, node: str) -> Verdict:
        if attrs.subresource not in ("", "status"):
            return NO_OPINION
        if attrs.verb in _READ:
            return _ALLOW
        if attrs.verb == "create" and not attrs.subresource:
            return _ALLOW  # the name in the body is checked by NodeRestriction admission
        if attrs.name == node and attrs.verb in ("update", "patch", "delete"):
            return _ALLOW
        return _deny(f"node '{node}' cannot modify node '{attrs.name or '*'}'")

    def _lease(self, attrs: Attributes, node: str) -> Verdict:
        if attrs.namespace != LEASE_NAMESPACE or attrs.subresource:
            return NO_OPINION
        if attrs.verb == "create":
            return _ALLOW  # the name is checked by NodeRestriction admission
        if attrs.name == node and attrs.verb in ("get", "update", "patch", "delete", "list", "watch"):
            return _ALLOW
        return _deny(f"node '{node}' can only access its own lease")

    def _pods(self, attrs: Attributes, node: str) -> Verdict:
        verb, sub = attrs.verb, attrs.subresource
        if verb in ("list", "watch") and not sub:
            if attrs.node_name_selector == node:
                return _ALLOW
            return _deny(f"node '{node}' can only list and watch pods with spec.nodeName={node}")
        if not attrs.name:
            return _deny(f"node '{node}' cannot {verb} every pod")
        pod = self._pod_by_name(attrs.namespace, attrs.name)
        bound = pod is not None and _spec(pod).get("nodeName") == node
        if not bound:
            return _deny(f"no relationship found between node '{node}' and this object")
        if (not sub and verb in ("get", "delete")) or (sub == "status" and verb in ("get", "update", "patch")):
            return _ALLOW
        return NO_OPINION

    def _volume(self, attrs: Attributes, node: str) -> Verdict:
        """A volume bound to a claim one of the node's pods uses (kube's node -> pod -> pvc -> pv)."""
        if self._claim_by_name is not None and attrs.name:
            for pod in self._pods_on_node(node):
                ns = str((pod.get("metadata") or {}).get("namespace") or "")
                for resource, name in references(pod):
                    if resource != "persistentvolumeclaims":
                        continue
                    claim = self._claim_by_name(ns, name)
                    if claim is not None and _spec(claim).get("volumeName") == attrs.name:
                        return _ALLOW
        return _deny(f"no relationship found between node '{node}' and this object")

    def _referenced(self, attrs: Attributes, node: str, *verbs: str) -> Verdict:
        if attrs.verb not in verbs:
            return NO_OPINION
        if not attrs.name or not attrs.namespace:
            return _deny(f"node '{node}' can only get individual {attrs.resource}")
        for pod in self._pods_on_node(node):
            meta = pod.get("metadata")
            if isinstance(meta, Mapping) and meta.get("namespace") == attrs.namespace:
                if (attrs.resource, attrs.name) in set(references(pod)):
                    return _ALLOW
        return _deny(f"no relationship found between node '{node}' and this object")


def _spec(pod: Obj) -> Mapping[str, Any]:
    spec = pod.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _dicts(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping):
                yield item


def _name(value: Any, key: str = "name") -> str | None:
    if isinstance(value, Mapping):
        name = value.get(key)
        if isinstance(name, str) and name:
            return name
    return None


def references(pod: Obj) -> Iterator[tuple[str, str]]:
    """(resource, name) of every secret, config map, claim and service account a pod uses."""
    spec = _spec(pod)
    yield "serviceaccounts", str(spec.get("serviceAccountName") or "default")
    for secret in _dicts(spec.get("imagePullSecrets")):
        if (n := _name(secret)) is not None:
            yield "secrets", n
    for volume in _dicts(spec.get("volumes")):
        if (n := _name(volume.get("secret"), "secretName")) is not None:
            yield "secrets", n
        if (n := _name(volume.get("configMap"))) is not None:
            yield "configmaps", n
        if (n := _name(volume.get("persistentVolumeClaim"), "claimName")) is not None:
            yield "persistentvolumeclaims", n
        projected = volume.get("projected")
        if isinstance(projected, Mapping):
            for source in _dicts(projected.get("sources")):
                if (n := _name(source.get("secret"))) is not None:
                    yield "secrets", n
                if (n := _name(source.get("configMap"))) is not None:
                    yield "configmaps", n
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for container in _dicts(spec.get(field)):
            for source in _dicts(container.get("envFrom")):
                if (n := _name(source.get("secretRef"))) is not None:
                    yield "secrets", n
                if (n := _name(source.get("configMapRef"))) is not None:
                    yield "configmaps", n
            for env in _dicts(container.get("env")):
                value_from = env.get("valueFrom")
                if isinstance(value_from, Mapping):
                    if (n := _name(value_from.get("secretKeyRef"))) is not None:
                        yield "secrets", n
                    if (n := _name(value_from.get("configMapKeyRef"))) is not None:
                        yield "configmaps", n
