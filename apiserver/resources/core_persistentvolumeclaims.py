"""core/v1 PersistentVolumeClaim: a user's request for storage, bound to one volume.

Validation is kube's (ValidatePersistentVolumeClaim and ...Update): a claim names its access
modes and a positive storage request; once created its spec is fixed, except that the binder
fills `volumeName` once, a claim without a class may be given one, and a *bound* claim's storage
request may change — grow (the PersistentVolumeClaimResize admission plugin then checks that its
class allows expansion), or shrink back towards a failed expansion but never to or below the
capacity it has (kube's RecoverVolumeExpansionFailure, on by default since 1.32).
"""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._resourcelists import canonicalize
from apiserver.resources._storage import access_modes, default_volume
from apiserver.resources._stored import stored_kind
from apiserver.resources._workload import validate_label_selector
from apiserver.resources.base import Column
from machinery.objects import Obj, get, text
from machinery.quantity import Quantity, parse_or_none

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
STORAGE_FIELD = "spec.resources[storage]"  # kube's path: fldPath.Child("resources").Key("storage")
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
IMMUTABLE_SPEC = (
    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
)


def default(pvc: Obj) -> None:
    """The shared volume defaults; quantities stored canonical, as kube re-encodes them."""
    default_volume(pvc)
    resources = get(pvc, "spec.resources")
    canonicalize(resources, "requests")
    canonicalize(resources, "limits")
    for key in ("capacity", "allocatedResources"):
        canonicalize(pvc.get("status"), key)


def storage_of(values: Any) -> Quantity | None:
    """The `storage` quantity of a ResourceList, None when absent or unparsable."""
    return parse_or_none(values.get("storage") if isinstance(values, dict) else None)


def _spec_rules(spec: Obj) -> list[Cause]:
    """ValidatePersistentVolumeClaimSpec."""
    causes: list[Cause] = []
    modes = spec.get("accessModes")
    held = modes if isinstance(modes, list) else []
    if not held:
        causes.append(v.required("spec.accessModes", "at least 1 access mode is required"))
    for mode in held:
        if mode not in ACCESS_MODES:
            causes.append(v.not_supported("spec.accessModes", mode, ACCESS_MODES))
    if "ReadWriteOncePod" in held and any(m in ACCESS_MODES and m != "ReadWriteOncePod" for m in held):
        causes.append(v.forbidden("spec.accessModes", "may not use ReadWriteOncePod with other access modes"))
    if spec.get("selector") is not None:
        causes += validate_label_selector(spec["selector"], "spec.selector")
    requests = get(spec, "resources.requests")
    raw = requests.get("storage") if isinstance(requests, dict) else None
    if raw is None:
        causes.append(v.required(STORAGE_FIELD))
    else:
        storage = storage_of(requests)
        if storage is None:
            causes.append(v.invalid(STORAGE_FIELD, raw, "must be a quantity"))
        elif storage.value <= 0:
            causes.append(v.invalid(STORAGE_FIELD, raw, "must be greater than zero"))
    for field in ("storageClassName", "volumeAttributesClassName"):
        name = spec.get(field)
        if isinstance(name, str) and name:
            causes += [v.invalid(f"spec.{field}", name, m) for m in v.is_dns1123_subdomain(name)]
    mode = spec.get("volumeMode")
    if mode is not None and mode not in VOLUME_MODES:
        causes.append(v.not_supported("spec.volumeMode", mode, VOLUME_MODES))
    return causes


def _comparable_specs(new: Obj, old: Obj) -> tuple[Obj, Obj]:
    """The two specs with what an update may change made equal, so what differs is forbidden."""
    new_spec = dict(get(new, "spec") or {})
    old_spec = dict(get(old, "spec") or {})
    if not old_spec.get("volumeName"):  # the binder fills it once
        old_spec["volumeName"] = new_spec.get("volumeName")
    if "storageClassName" not in old_spec and new_spec.get("storageClassName") is not None:
        annotated = (get(old, "metadata.annotations") or {}).get(BETA_CLASS_ANNOTATION)
        if annotated is None or annotated == new_spec["storageClassName"]:  # a class given to a claim without one
            old_spec["storageClassName"] = new_spec["storageClassName"]
    if text(new, "status.phase") == "Bound":
        new_spec["resources"] = _with_storage(new_spec.get("resources"), get(old_spec, "resources.requests.storage"))
        if "volumeAttributesClassName" in new_spec:
            new_spec["volumeAttributesClassName"] = old_spec.get("volumeAttributesClassName")
    for spec in (new_spec, old_spec):  # absent and empty are one (Semantic.DeepEqual of Go zero values)
        for field in ("volumeAttributesClassName", "volumeName"):
            if not spec.get(field):
                spec.pop(field, None)
    return new_spec, old_spec


def _with_storage(resources: Any, storage: Any) -> Any:
    if not isinstance(resources, dict) or not isinstance(resources.get("requests"), dict):
        return resources
    requests = {k: val for k, val in resources["requests"].items() if k != "storage"}
    if storage is not None:
        requests["storage"] = storage
    return {**resources, "requests": requests}


def _update_rules(new: Obj, old: Obj) -> list[Cause]:
    """ValidatePersistentVolumeClaimUpdate, past the create checks."""
    causes: list[Cause] = []
    new_spec, old_spec = _comparable_specs(new, old)
    if new_spec != old_spec:
        changed = sorted(k for k in {*new_spec, *old_spec} if new_spec.get(k) != old_spec.get(k))
        causes.append(v.forbidden("spec", f"{IMMUTABLE_SPEC} (changed: {', '.join(changed)})"))
    old_size = storage_of(get(old, "spec.resources.requests"))
    new_size = storage_of(get(new, "spec.resources.requests"))
    if old_size is not None and new_size is not None and new_size < old_size:
        capacity = storage_of(get(old, "status.capacity"))
        if new_size.value <= (capacity.value if capacity is not None else 0):
            causes.append(v.forbidden("spec.resources.requests.storage", "field can not be less than status.capacity"))
    if get(new, "spec.volumeMode") != get(old, "spec.volumeMode"):
        causes.append(v.immutable("volumeMode", get(new, "spec.volumeMode")))
    old_class = get(old, "spec.volumeAttributesClassName")
    new_class = get(new, "spec.volumeAttributesClassName")
    if old_class is not None and new_class != old_class:
        if new_class is None:
            causes.append(
                v.forbidden("spec.volumeAttributesClassName", "update from non-nil value to nil is forbidden")
            )
        elif new_class == "":
            detail = "update from non-nil value to an empty string is forbidden"
            causes.append(v.forbidden("spec.volumeAttributesClassName", detail))
    return causes


def rules(pvc: Obj, old: Obj | None) -> list[Cause]:
    spec = pvc.get("spec")
    causes = _spec_rules(spec) if isinstance(spec, dict) else [v.required("spec")]
    if old is not None and not causes:
        causes += _update_rules(pvc, old)
    return causes


def row(pvc: Obj, now: float) -> list[Any]:
    bound = text(pvc, "status.phase") == "Bound"
    return [
        text(pvc, "status.phase"),
        text(pvc, "spec.volumeName"),
        text(pvc, "status.capacity.storage") if bound else "",
        access_modes(get(pvc, "status.accessModes")) if bound else "",
        text(pvc, "spec.storageClassName"),
        text(pvc, "spec.volumeAttributesClassName") or "<unset>",
        text(pvc, "spec.volumeMode"),
    ]


RESOURCE = stored_kind(
    group="",
    version="v1",
    kind="PersistentVolumeClaim",
    plural="persistentvolumeclaims",
    namespaced=True,
    short_names=("pvc",),
    status={},
    status_view=STATUS_VIEW,
    default=default,
    rules=rules,
    columns=(
        Column("Status", description="The phase of the claim."),
        Column("Volume", description="The volume bound to the claim."),
        Column("Capacity", description="The capacity of the bound volume."),
        Column("Access Modes", description="The ways the bound volume can be mounted."),
        Column("StorageClass", description="The storage class of the claim."),
        Column("VolumeAttributesClass", description="The volume attributes class of the claim."),
        Column("VolumeMode", priority=1, description="Whether the volume is a filesystem or a raw block device."),
    ),
    row=row,
)
