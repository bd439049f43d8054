"""PersistentVolumeClaimResize: a claim's storage request may grow only when it is bound and its
StorageClass says `allowVolumeExpansion: true` (kube's plugin of that name).

Validation (`core_persistentvolumeclaims`) already keeps a claim's spec fixed but for a bound
claim's request; this plugin adds what needs another object — the class.  Shrinking (back from a
failed expansion) and unchanged sizes pass; a class that is absent, different between the two
versions, or silent refuses, with kube's 403 messages.
"""

from __future__ import annotations

from typing import Any, Protocol

from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.refusal import forbidden
from apiserver.resources.core_persistentvolumeclaims import storage_of
from machinery.objects import Obj

NOT_BOUND = "Only bound persistent volume claims can be expanded"
NOT_EXPANDABLE = (
    "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
)


class StorageClasses(Protocol):
    def get_object(self, namespace: str | None, name: str) -> Obj | None: ...


def _class_name(pvc: Obj | None) -> str:
    spec: Any = (pvc or {}).get("spec") or {}
    return str(spec.get("storageClassName") or "")


class PersistentVolumeClaimResize:
    name = "PersistentVolumeClaimResize"

    def __init__(self, classes: StorageClasses | None) -> None:
        self._classes = classes

    def handles(self, request: AdmissionRequest) -> bool:
        return (
            request.operation == "UPDATE"
            and request.resource.group == ""
            and request.resource.plural == "persistentvolumeclaims"
            and not request.subresource
        )

    async def validate(self, request: AdmissionRequest) -> None:
        new, old = request.object or {}, request.old_object or {}
        new_size = storage_of(((new.get("spec") or {}).get("resources") or {}).get("requests"))
        old_size = storage_of(((old.get("spec") or {}).get("resources") or {}).get("requests"))
        if new_size is None or old_size is None or new_size <= old_size:
            return
        if (old.get("status") or {}).get("phase") != "Bound":
            raise forbidden(request, NOT_BOUND)
        if not self._allows_expansion(_class_name(new), _class_name(old)):
            raise forbidden(request, NOT_EXPANDABLE)

    def _allows_expansion(self, new_class: str, old_class: str) -> bool:
        if not new_class or new_class != old_class or self._classes is None:
            return False
        storage_class = self._classes.get_object(None, new_class)
        return storage_class is not None and storage_class.get("allowVolumeExpansion") is True
