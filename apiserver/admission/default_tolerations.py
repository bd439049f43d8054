"""DefaultTolerationSeconds: every pod tolerates its node being not-ready or unreachable for
300 s before it is evicted (NoExecute), unless it already says how long, as kube's plugin
adds to each pod it admits."""

from __future__ import annotations

from typing import Any

from apiserver.admission.interface import AdmissionRequest

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_SECONDS = 300


def _tolerates(tolerations: list[Any], key: str) -> bool:
    """A toleration of `key` (or of every key) with effect NoExecute (or every effect)."""
    for t in tolerations:
        if (
            isinstance(t, dict)
            and t.get("key", "") in (key, "", None)
            and t.get("effect", "") in ("NoExecute", "", None)
        ):
            return True
    return False


class DefaultTolerationSeconds:
    name = "DefaultTolerationSeconds"

    def __init__(self, not_ready_seconds: int = DEFAULT_SECONDS, unreachable_seconds: int = DEFAULT_SECONDS) -> None:
        self._seconds = {NOT_READY: not_ready_seconds, UNREACHABLE: unreachable_seconds}

    def handles(self, request: AdmissionRequest) -> bool:
        return (
            request.operation in ("CREATE", "UPDATE")
            and request.resource.group == ""
            and request.resource.plural == "pods"
            and not request.subresource
        )

    async def admit(self, request: AdmissionRequest) -> None:
        spec = (request.object or {}).get("spec")
        if not isinstance(spec, dict):
            return
        tolerations = spec.get("tolerations")
        if tolerations is None:
            tolerations = []
        if not isinstance(tolerations, list):
            return  # validation refuses it
        added = [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
            for key, seconds in self._seconds.items()
            if not _tolerates(tolerations, key)
        ]
        if added:
            spec["tolerations"] = [*tolerations, *added]
