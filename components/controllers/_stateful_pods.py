"""A StatefulSet's pods as kube's stateful set utilities see them: identity by ordinal, the
pod made for an ordinal from a revision, and the health that gates ordered scaling.

Pod `<set>-<ordinal>` is the set's ordinal-th member: hostname its name, subdomain the
set's serviceName, labels the template's plus `statefulset.kubernetes.io/pod-name`,
`apps.kubernetes.io/pod-index` and `controller-revision-hash` (for StatefulSets, the
revision's *name*).  Each claim template becomes a claim `<template>-<pod>` the pod mounts.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from components.controllers._history import REVISION_HASH_LABEL
from components.controllers._workload_pods import is_available, owner_ref
from machinery.objects import Obj, metadata, spec, status
from machinery.pods import is_ready

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
_ORDINAL = re.compile(r"^(.*)-(\d+)$")


def ordinal_of(set_name: str, pod: Obj) -> int | None:
    """The ordinal a pod's name gives it in the set, None when the name is not `<set>-<n>`."""
    m = _ORDINAL.match(str(metadata(pod).get("name") or ""))
    if m is None or m.group(1) != set_name:
        return None
    return int(m.group(2))


def replicas_of(sts: Obj) -> int:
    value = spec(sts).get("replicas")
    return value if isinstance(value, int) else 1


def start_ordinal(sts: Obj) -> int:
    ordinals = spec(sts).get("ordinals")
    start = ordinals.get("start") if isinstance(ordinals, dict) else None
    return start if isinstance(start, int) else 0


def parallel(sts: Obj) -> bool:
    return spec(sts).get("podManagementPolicy") == "Parallel"


def partition(sts: Obj) -> int:
    strategy = spec(sts).get("updateStrategy") or {}
    rolling = strategy.get("rollingUpdate") if isinstance(strategy, dict) else None
    value = rolling.get("partition") if isinstance(rolling, dict) else None
    return value if isinstance(value, int) else 0


def rolling(sts: Obj) -> bool:
    return ((spec(sts).get("updateStrategy") or {}).get("type") or "RollingUpdate") == "RollingUpdate"


def terminating(pod: Obj) -> bool:
    return bool(metadata(pod).get("deletionTimestamp"))


def failed(pod: Obj) -> bool:
    return status(pod).get("phase") == "Failed"


def running_and_ready(pod: Obj) -> bool:
    return status(pod).get("phase") == "Running" and is_ready(pod)


def healthy(pod: Obj, min_ready: int, now: float) -> bool:
    """Running, ready (for minReadySeconds) and not going: what ordered scaling waits for."""
    return running_and_ready(pod) and not terminating(pod) and is_available(pod, min_ready, now)


def revision_template(revision: Mapping[str, Any]) -> Obj:
    """The pod template a revision holds (its data is the patch that puts it back)."""
    template = copy.deepcopy(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


def claim_name(template_name: str, pod_name: str) -> str:
    return f"{template_name}-{pod_name}"


def new_pod(sts: Obj, template: Obj, revision_name: str, ordinal: int) -> Obj:
    """The pod of `ordinal` from `template` (the revision's) with the set's identity."""
    name = f"{metadata(sts).get('name')}-{ordinal}"
    tmeta = template.get("metadata") or {}
    labels = {
        **(tmeta.get("labels") or {}),
        POD_NAME_LABEL: name,
        POD_INDEX_LABEL: str(ordinal),
        REVISION_HASH_LABEL: revision_name,
    }
    pod_spec = copy.deepcopy(template.get("spec") or {})
    pod_spec["hostname"] = name
    if spec(sts).get("serviceName"):
        pod_spec["subdomain"] = spec(sts)["serviceName"]
    volumes = [v for v in pod_spec.get("volumes") or () if isinstance(v, dict)]
    for claim in spec(sts).get("volumeClaimTemplates") or ():
        claim_template = str(metadata(claim).get("name") or "")
        volumes = [v for v in volumes if v.get("name") != claim_template]
        volumes.append(
            {"name": claim_template, "persistentVolumeClaim": {"claimName": claim_name(claim_template, name)}}
        )
    if volumes:
        pod_spec["volumes"] = volumes
    body_meta: Obj = {
        "name": name,
        "labels": labels,
        "ownerReferences": [owner_ref(sts, "StatefulSet", "apps/v1")],
    }
    for member in ("annotations", "finalizers"):
        if tmeta.get(member):
            body_meta[member] = copy.deepcopy(tmeta[member])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": body_meta, "spec": pod_spec}


def retention(sts: Obj, when: str) -> str:
    """`persistentVolumeClaimRetentionPolicy.whenDeleted|whenScaled`: Retain (default) or Delete."""
    policy = spec(sts).get("persistentVolumeClaimRetentionPolicy")
    value = policy.get(when) if isinstance(policy, dict) else None
    return "Delete" if value == "Delete" else "Retain"


def claim_owner(owner: Obj, kind: str, api_version: str) -> Obj:
    """The non-controller reference that lets the garbage collector take a claim with its
    owner (the set, when whenDeleted is Delete; a condemned pod, when whenScaled is)."""
    m = metadata(owner)
    return {"apiVersion": api_version, "kind": kind, "name": m.get("name"), "uid": m.get("uid")}


def claims_for(sts: Obj, pod_name: str) -> list[Obj]:
    """The PersistentVolumeClaims the pod of that name mounts (one per claim template), owned
    by the set when its retention policy deletes them with it."""
    out = []
    selector_labels = ((spec(sts).get("selector") or {}).get("matchLabels")) or {}
    for claim in spec(sts).get("volumeClaimTemplates") or ():
        body = copy.deepcopy(claim)
        m = body.setdefault("metadata", {})
        m["name"] = claim_name(str(metadata(claim).get("name") or ""), pod_name)
        m["namespace"] = metadata(sts).get("namespace")
        m["labels"] = {**(m.get("labels") or {}), **selector_labels}
        body["apiVersion"], body["kind"] = "v1", "PersistentVolumeClaim"
        body.pop("status", None)
        if retention(sts, "whenDeleted") == "Delete":
            m["ownerReferences"] = [claim_owner(sts, "StatefulSet", "apps/v1")]
        out.append(body)
    return out
