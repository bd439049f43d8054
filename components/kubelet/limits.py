"""A container's resource limits as the shim applies them (cgroups v2 where available, else
rlimits)."""

from __future__ import annotations

from typing import Any


def of(container: dict[str, Any]) -> dict[str, Any]:
    """The limits to apply to `container` (JSON, kept in the run's spec); {}: none."""
    return {}
