"""What persistent volumes and claims share: the access-mode abbreviations kube's printers use,
and the defaults both get (volumeMode Filesystem, phase Pending)."""

from __future__ import annotations

from typing import Any

from apiserver.resources._shared import ensure
from machinery.objects import Obj

_ACCESS = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def access_modes(modes: Any) -> str:
    """printers.go's GetAccessModesAsString: the short forms in kube's fixed order, comma-joined."""
    held = modes if isinstance(modes, list) else []
    return ",".join(short for long, short in _ACCESS.items() if long in held)


def default_volume(obj: Obj) -> None:
    """volumeMode Filesystem (SetDefaults_PersistentVolume(Claim)Spec) and status.phase Pending."""
    spec = ensure(obj, "spec")
    if spec is not None:
        spec.setdefault("volumeMode", "Filesystem")
    status = ensure(obj, "status")
    if status is not None:
        status.setdefault("phase", "Pending")
