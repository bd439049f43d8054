"""core/v1 PersistentVolumeClaim: kube's create and update validation (a fixed spec but for a
bound claim's storage request), and the PersistentVolumeClaimResize admission plugin that lets a
request grow only in a class allowing expansion."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.pvc_resize import NOT_BOUND, NOT_EXPANDABLE, PersistentVolumeClaimResize
from apiserver.auth.user import User
from machinery.objects import Obj
from tests.apiserver.kinds_support import causes, create, find, rejected

CLAIMS = find("", "persistentvolumeclaims")


def claim(size: Any = "1Gi", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    body.update(spec)
    return {"metadata": {"name": "data", "namespace": "default"}, "spec": body}


def bound(size: str = "1Gi", capacity: str = "1Gi", cls: str = "fast") -> dict[str, Any]:
    made = claim(size, storageClassName=cls, volumeName="pv-1", volumeMode="Filesystem")
    made["status"] = {"phase": "Bound", "capacity": {"storage": capacity}}
    return made


def update(new: Obj, old: Obj) -> list[str]:
    """The causes of replacing `old` (stored, so defaulted) with `new`."""
    stored = copy.deepcopy(old)
    CLAIMS.default(stored)
    return causes(CLAIMS, new, stored)


def resized(old: Obj, size: str) -> Obj:
    new = copy.deepcopy(old)
    new["spec"]["resources"]["requests"]["storage"] = size
    return new


def test_a_claim_names_its_access_modes_and_a_positive_storage_request() -> None:
    assert rejected(CLAIMS, {"metadata": {"name": "x"}, "spec": {"resources": {}}}) == [
        "spec.accessModes: Required value: at least 1 access mode is required",
        "spec.resources[storage]: Required value",
    ]
    assert rejected(CLAIMS, claim("0", accessModes=["ReadWriteOncePod", "ReadWriteOnce", "Sometimes"])) == [
        'spec.accessModes: Unsupported value: "Sometimes": supported values: "ReadOnlyMany", "ReadWriteMany", '
        '"ReadWriteOnce", "ReadWriteOncePod"',
        "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
        'spec.resources[storage]: Invalid value: "0": must be greater than zero',
    ]
    assert rejected(CLAIMS, claim(volumeMode="Tape", storageClassName="Not_A_Name"))[1:] == [
        'spec.volumeMode: Unsupported value: "Tape": supported values: "Block", "Filesystem"'
    ]
    assert create(CLAIMS, claim("0.5Gi"))["spec"]["resources"]["requests"] == {"storage": "512Mi"}  # canonical


def test_a_claims_spec_is_fixed_but_for_what_binding_and_resizing_change() -> None:
    pending = claim("1Gi", storageClassName="fast")
    pending["status"] = {"phase": "Pending"}
    # the binder fills volumeName once; a pending claim's size cannot change
    assert update({**pending, "spec": {**pending["spec"], "volumeName": "pv-1"}}, pending) == []
    assert update(resized(pending, "2Gi"), pending) == [
        "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName "
        "for bound claims (changed: resources)"
    ]
    old = bound()
    assert update(resized(old, "5Gi"), old) == []  # a bound claim may ask for more
    moved = {**old, "spec": {**old["spec"], "volumeName": "pv-2", "accessModes": ["ReadWriteMany"]}}
    assert update(moved, old) == [
        "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName "
        "for bound claims (changed: accessModes, volumeName)"
    ]
    # back from a failed expansion: down towards the capacity it has, never to it
    asking = bound("5Gi", capacity="1Gi")
    assert update(resized(asking, "2Gi"), asking) == []
    assert update(resized(asking, "1Gi"), asking) == [
        "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
    ]
    # a claim without a class may be given one; one with a class keeps it
    classless = claim("1Gi")
    assert update(claim("1Gi", storageClassName="fast"), classless) == []
    assert update(claim("1Gi", storageClassName="slow"), claim("1Gi", storageClassName="fast"))[0].startswith(
        "spec: Forbidden: spec is immutable"
    )


class Classes:
    """StorageClasses by name, as the admission plugin reads them from the watch cache."""

    def __init__(self, *classes: Obj) -> None:
        self._by_name = {c["metadata"]["name"]: c for c in classes}

    def get_object(self, namespace: str | None, name: str) -> Obj | None:
        return self._by_name.get(name)


def _resize(plugin: PersistentVolumeClaimResize, new: Obj, old: Obj) -> None:
    req = AdmissionRequest("UPDATE", CLAIMS, "", "default", "data", User("alice"), new, old)
    assert plugin.handles(req)
    asyncio.run(plugin.validate(req))


def test_only_a_bound_claim_of_an_expandable_class_grows() -> None:
    plugin = PersistentVolumeClaimResize(
        Classes(
            {"metadata": {"name": "fast"}, "allowVolumeExpansion": True},
            {"metadata": {"name": "fixed"}, "allowVolumeExpansion": False},
        )
    )
    _resize(plugin, resized(bound(), "3Gi"), bound())
    _resize(plugin, resized(bound("3Gi"), "2Gi"), bound("3Gi"))  # shrinking is validation's business
    for new, old, why in (
        (resized(bound(cls="fixed"), "3Gi"), bound(cls="fixed"), NOT_EXPANDABLE),
        (resized(bound(cls="gone"), "3Gi"), bound(cls="gone"), NOT_EXPANDABLE),
        (resized(claim(), "3Gi"), claim(), NOT_BOUND),
    ):
        with pytest.raises(errors.StatusError) as err:
            _resize(plugin, new, old)
        assert err.value.code == 403
        assert err.value.message == f'persistentvolumeclaims "data" is forbidden: {why}'
