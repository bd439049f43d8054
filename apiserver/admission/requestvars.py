"""The variables a policy's expressions see besides `params`: `object`, `oldObject`,
`request` (kube's admission.k8s.io/v1 AdmissionRequest as CEL sees it: fields that are empty
in Go are absent) and `namespaceObject` (the request's namespace, with only the metadata
fields kube exposes; null for cluster-scoped writes)."""

from __future__ import annotations

from apiserver.admission.interface import AdmissionRequest
from machinery.objects import Obj

_NAMESPACE_META = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
)


def request_variable(request: AdmissionRequest) -> Obj:
    res = request.resource
    group, version, kind = res.group, res.version, res.kind
    for sub in res.subresources:
        if request.subresource and sub.name == request.subresource:
            group = res.group if sub.group is None else sub.group
            version = res.version if sub.version is None else sub.version
            kind = sub.kind
    user: Obj = {"username": request.user.name}
    if request.user.uid:
        user["uid"] = request.user.uid
    if request.user.groups:
        user["groups"] = list(request.user.groups)
    if request.user.extra:
        user["extra"] = request.user.extra_dict()
    out: Obj = {
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": res.group, "version": res.version, "resource": res.plural},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": res.group, "version": res.version, "resource": res.plural},
        "operation": request.operation,
        "userInfo": user,
        "dryRun": request.dry_run,
    }
    if request.subresource:
        out["subResource"] = out["requestSubResource"] = request.subresource
    if request.name:
        out["name"] = request.name
    if request.namespace:
        out["namespace"] = request.namespace
    return out


def namespace_variable(namespace: Obj | None) -> Obj | None:
    if namespace is None:
        return None
    meta = namespace.get("metadata") if isinstance(namespace.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    out: Obj = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {k: meta[k] for k in _NAMESPACE_META if k in meta},
    }
    for key in ("spec", "status"):
        if key in namespace:
            out[key] = namespace[key]
    return out
