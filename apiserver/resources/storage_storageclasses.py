"""storage.k8s.io/v1 StorageClass: how volumes of a class are provisioned (fixed once created)."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get, text


def default(sc: Obj) -> None:
    """storage/v1 SetDefaults_StorageClass."""
    sc.setdefault("reclaimPolicy", "Delete")
    sc.setdefault("volumeBindingMode", "Immediate")


def rules(sc: Obj, old: Obj | None) -> list[Cause]:
    """ValidateStorageClass: a provisioner named as a qualified name, known policies."""
    causes: list[Cause] = []
    provisioner = sc.get("provisioner")
    if provisioner == "":
        causes.append(v.required("provisioner"))
    elif isinstance(provisioner, str):
        causes += [v.invalid("provisioner", provisioner, m) for m in v.is_qualified_name(provisioner.lower())]
    causes += v.validate_enum(sc.get("reclaimPolicy"), "reclaimPolicy", ("Delete", "Retain"))
    causes += v.validate_enum(sc.get("volumeBindingMode"), "volumeBindingMode", ("Immediate", "WaitForFirstConsumer"))
    return causes


def row(sc: Obj, now: float) -> list[Any]:
    return [
        text(sc, "provisioner"),
        text(sc, "reclaimPolicy"),
        text(sc, "volumeBindingMode"),
        get(sc, "allowVolumeExpansion") is True,
    ]


RESOURCE = stored_kind(
    group="storage.k8s.io",
    version="v1",
    kind="StorageClass",
    plural="storageclasses",
    namespaced=False,
    short_names=("sc",),
    default=default,
    rules=rules,
    immutable=("parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"),
    columns=(
        Column("Provisioner", description="The provisioner of the class."),
        Column("ReclaimPolicy", description="What happens to a provisioned volume when released."),
        Column("VolumeBindingMode", description="When volumes are bound and provisioned."),
        Column("AllowVolumeExpansion", description="Whether volumes of the class can be expanded."),
    ),
    row=row,
)
