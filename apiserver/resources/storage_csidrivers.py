"""storage.k8s.io/v1 CSIDriver: how Kubernetes talks to one CSI volume driver."""

from __future__ import annotations

from typing import Any

from apiserver.resources._shared import ensure
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get, text


def default(driver: Obj) -> None:
    """storage/v1 SetDefaults_CSIDriver."""
    spec = ensure(driver, "spec")
    if spec is None:
        return
    spec.setdefault("attachRequired", True)
    spec.setdefault("podInfoOnMount", False)
    spec.setdefault("storageCapacity", False)
    spec.setdefault("fsGroupPolicy", "ReadWriteOnceWithFSType")
    spec.setdefault("requiresRepublish", False)
    spec.setdefault("seLinuxMount", False)
    if not spec.get("volumeLifecycleModes"):
        spec["volumeLifecycleModes"] = ["Persistent"]


def _flag(obj: Obj, path: str) -> str:
    value = get(obj, path)
    return "unknown" if value is None else str(value is True).lower()


def row(driver: Obj, now: float) -> list[Any]:
    tokens = get(driver, "spec.tokenRequests")
    audiences = ",".join(text(t, "audience") for t in tokens if isinstance(t, dict)) if isinstance(tokens, list) else ""
    modes = get(driver, "spec.volumeLifecycleModes")
    return [
        _flag(driver, "spec.attachRequired"),
        _flag(driver, "spec.podInfoOnMount"),
        _flag(driver, "spec.storageCapacity"),
        audiences or "<unset>",
        _flag(driver, "spec.requiresRepublish"),
        ",".join(str(m) for m in modes) if isinstance(modes, list) and modes else "<none>",
    ]


RESOURCE = stored_kind(
    group="storage.k8s.io",
    version="v1",
    kind="CSIDriver",
    plural="csidrivers",
    namespaced=False,
    default=default,
    immutable=("spec.attachRequired", "spec.podInfoOnMount", "spec.volumeLifecycleModes", "spec.storageCapacity"),
    columns=(
        Column("AttachRequired", "boolean", description="Whether the driver needs an attach operation."),
        Column("PodInfoOnMount", "boolean", description="Whether pod information is passed on mount."),
        Column("StorageCapacity", "boolean", description="Whether the driver reports storage capacity."),
        Column("TokenRequests", description="The audiences of the service account tokens the driver asks for."),
        Column("RequiresRepublish", "boolean", description="Whether NodePublishVolume is called periodically."),
        Column("Modes", description="The volume lifecycle modes the driver supports."),
    ),
    row=row,
)
