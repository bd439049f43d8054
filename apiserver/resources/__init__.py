"""Every served resource: each module here defines `RESOURCE` (a ResourceDef) or `RESOURCES`."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from apiserver.resources.base import ResourceDef


@cache
def catalog() -> tuple[ResourceDef, ...]:
    """All resources, in module order; discovery lists groups in the order they first appear."""
    found: list[ResourceDef] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in ("base",) or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        one = getattr(module, "RESOURCE", None)
        if one is not None:
            found.append(one)
        found.extend(getattr(module, "RESOURCES", ()))
    return tuple(found)
