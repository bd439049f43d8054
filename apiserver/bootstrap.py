"""What every cluster has from its first start, as kube-apiserver's bootstrap controller makes
it: the namespaces default, kube-system, kube-public and kube-node-lease."""

from __future__ import annotations

import logging

from apiserver import errors
from apiserver.registry.generic import Registry

log = logging.getLogger("raftkube.apiserver")

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


async def ensure_system_namespaces(namespaces: Registry) -> None:
    """Create the system namespaces that are missing (another apiserver may race us: fine)."""
    for name in SYSTEM_NAMESPACES:
        try:
            await namespaces.create(None, {"metadata": {"name": name}}, manager="kube-apiserver")
        except errors.StatusError as e:
            if e.code != 409:
                log.warning("could not create the %s namespace yet: %s", name, e.message)
