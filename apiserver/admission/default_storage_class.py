"""DefaultStorageClass: a new PersistentVolumeClaim that names no class gets the default one.

As kube's plugin: a claim whose `spec.storageClassName` is absent (not "" — that asks for no
class) gets the StorageClass annotated `storageclass.kubernetes.io/is-default-class: "true"`;
with several defaults the newest wins (kube 1.28+), with none the claim stays without one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from apiserver.admission.interface import AdmissionRequest
from machinery.objects import Obj

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


class StorageClasses(Protocol):
    def objects(self) -> Iterable[Obj]: ...


def default_class(classes: Iterable[Obj]) -> str | None:
    """The name of the default StorageClass (the newest of several), None without one."""
    found: list[tuple[str, str]] = []
    for sc in classes:
        meta: Any = sc.get("metadata") or {}
        if (meta.get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true":
            found.append((str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")))
    return max(found)[1] if found else None


class DefaultStorageClass:
    name = "DefaultStorageClass"

    def __init__(self, classes: StorageClasses | None) -> None:
        self._classes = classes

    def handles(self, request: AdmissionRequest) -> bool:
        return (
            request.operation == "CREATE"
            and request.resource.group == ""
            and request.resource.plural == "persistentvolumeclaims"
            and not request.subresource
        )

    async def admit(self, request: AdmissionRequest) -> None:
        spec = (request.object or {}).get("spec")
        if not isinstance(spec, dict) or "storageClassName" in spec or self._classes is None:
            return
        name = default_class(self._classes.objects())
        if name is not None:
            spec["storageClassName"] = name
