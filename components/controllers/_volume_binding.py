"""Which PersistentVolume a claim binds to, and the volume the local provisioner makes for one
(kube's PV binder's matching, pure).

A volume fits a claim when it is free (no claimRef, or one naming this claim), of the same
class (an empty class only with an empty class), its access modes include the claim's, its
volume mode is the claim's, its capacity is at least the request, and the claim's selector
selects its labels.  Of the fitting ones the smallest wins, a volume already reserved for the
claim first.

The built-in provisioner (`raftkube.io/local-path`) makes a volume a directory on one node:
a hostPath under the directory the node's kubelet announces (`raftkube.io/local-volume-dir`),
the node named in the volume's node affinity, so pods of the claim run where the data is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from machinery import local_volumes
from machinery.objects import Obj, labels, metadata, spec
from machinery.quantity import parse_or_none
from machinery.selectors import label_selector_matches

PROVISIONER = local_volumes.PROVISIONER
VOLUME_DIR_ANNOTATION = local_volumes.VOLUME_DIR_ANNOTATION
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _bytes(value: Any) -> int | None:
    q = parse_or_none(value)
    return int(q.value) if q is not None else None


def requested(claim: Obj) -> int:
    return _bytes(((spec(claim).get("resources") or {}).get("requests") or {}).get("storage")) or 0


def capacity(pv: Obj) -> int:
    return _bytes((spec(pv).get("capacity") or {}).get("storage")) or 0


def class_of(obj: Obj) -> str:
    return str(spec(obj).get("storageClassName") or "")


def fits(pv: Obj, claim: Obj) -> bool:
    ref = spec(pv).get("claimRef")
    cm = metadata(claim)
    if isinstance(ref, dict) and (ref.get("namespace"), ref.get("name")) != (cm.get("namespace"), cm.get("name")):
        return False
    if isinstance(ref, dict) and ref.get("uid") and ref.get("uid") != cm.get("uid"):
        return False
    if (pv.get("status") or {}).get("phase") in ("Released", "Failed") or metadata(pv).get("deletionTimestamp"):
        return False
    if class_of(pv) != class_of(claim):
        return False
    if not set(spec(claim).get("accessModes") or ()) <= set(spec(pv).get("accessModes") or ()):
        return False
    if (spec(claim).get("volumeMode") or "Filesystem") != (spec(pv).get("volumeMode") or "Filesystem"):
        return False
    if capacity(pv) < requested(claim):
        return False
    selector = spec(claim).get("selector")
    return selector is None or label_selector_matches(selector, labels(pv))


def best_volume(pvs: Iterable[Obj], claim: Obj) -> Obj | None:
    """The volume the claim binds to: one reserved for it, else the smallest that fits."""
    fitting = [pv for pv in pvs if fits(pv, claim)]
    reserved = [pv for pv in fitting if isinstance(spec(pv).get("claimRef"), dict)]
    pool = reserved or fitting
    return min(pool, key=lambda pv: (capacity(pv), str(metadata(pv).get("name")))) if pool else None


def claim_ref(claim: Obj) -> Obj:
    m = metadata(claim)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": m.get("namespace"),
        "name": m.get("name"),
        "uid": m.get("uid"),
        "resourceVersion": m.get("resourceVersion"),
    }


def node_of(pv: Obj) -> str | None:
    """The one node a local volume's affinity names (as `provisioned` writes it), else None."""
    affinity = (spec(pv).get("nodeAffinity") or {}).get("required") or {}
    terms = affinity.get("nodeSelectorTerms") if isinstance(affinity, dict) else None
    if not isinstance(terms, list) or len(terms) != 1 or not isinstance(terms[0], dict):
        return None
    expressions = terms[0].get("matchExpressions")
    if not isinstance(expressions, list) or len(expressions) != 1 or not isinstance(expressions[0], dict):
        return None
    expression = expressions[0]
    values = expression.get("values")
    if expression.get("key") != HOSTNAME_LABEL or expression.get("operator") != "In":
        return None
    return values[0] if isinstance(values, list) and len(values) == 1 and isinstance(values[0], str) else None


def is_local_directory(pv: Obj, node: Obj) -> bool:
    """Whether the volume is one of ours, a directory directly under the node's volume directory."""
    if (metadata(pv).get("annotations") or {}).get(PROVISIONED_BY) != PROVISIONER:
        return False
    directory = (metadata(node).get("annotations") or {}).get(VOLUME_DIR_ANNOTATION)
    path = (spec(pv).get("hostPath") or {}).get("path")
    name = str(metadata(pv).get("name"))
    return isinstance(directory, str) and path == f"{directory.rstrip('/')}/{name}"


def provisioned(claim: Obj, storage_class: Obj, node: Obj) -> Obj | None:
    """The local volume of `claim` on `node` (None when the node announces no directory)."""
    directory = (metadata(node).get("annotations") or {}).get(VOLUME_DIR_ANNOTATION)
    if not isinstance(directory, str) or not directory.startswith("/"):
        return None
    name = f"pvc-{metadata(claim).get('uid')}"
    node_name = str(metadata(node).get("name"))
    storage = ((spec(claim).get("resources") or {}).get("requests") or {}).get("storage") or "1Gi"
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "capacity": {"storage": storage},
            "accessModes": list(spec(claim).get("accessModes") or ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": str(storage_class.get("reclaimPolicy") or "Delete"),
            "storageClassName": str(metadata(storage_class).get("name")),
            "volumeMode": str(spec(claim).get("volumeMode") or "Filesystem"),
            "hostPath": {"path": f"{directory.rstrip('/')}/{name}", "type": "DirectoryOrCreate"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [node_name]}]}
                    ]
                }
            },
            "claimRef": claim_ref(claim),
        },
    }
