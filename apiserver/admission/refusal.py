"""The 403 an admission plugin refuses a write with, worded as kube's `admission.NewForbidden`:
`pods "p" is forbidden: <why>` (`leases.coordination.k8s.io "n1" is forbidden: ...`)."""

from __future__ import annotations

from typing import Any

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest


def forbidden(request: AdmissionRequest, why: str, causes: list[dict[str, str]] | None = None) -> errors.StatusError:
    res = request.resource
    name = request.name or str(((request.object or {}).get("metadata") or {}).get("name") or "")
    qualified = errors.qualified(res.plural, res.group)
    message = f'{qualified} "{name}" is forbidden: {why}' if name else f"{qualified} is forbidden: {why}"
    details: dict[str, Any] = {"kind": res.plural}
    if name:
        details["name"] = name
    if res.group:
        details["group"] = res.group
    if causes:
        details["causes"] = causes
    return errors.StatusError(403, "Forbidden", message, details)
