"""What a pod asks for: its effective requests and limits per resource, as kube computes them
for quota and limit ranges (component-helpers' resource.PodRequests: the larger of the
containers' sum and the largest init container, plus the pod overhead).  Quota admission charges
it and the quota controller recounts it, so both read it here.

Quantities that do not parse count as nothing: validation refuses them before any plugin that
counts them runs.  Objects are decoded JSON, so a mapping is a dict (the cheap isinstance: this
runs several times per container of every pod create)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from machinery.quantity import Quantity, QuantityError, parse_quantity

# a pod spec or container as decoded (a machinery.objects.Obj), only read here
JsonView = Mapping[str, Any]
Resources = dict[str, Quantity]


def _list(container: JsonView, which: str) -> Resources:
    resources = container.get("resources")
    values = resources.get(which) if isinstance(resources, dict) else None
    out: Resources = {}
    for name, raw in (values or {}).items() if isinstance(values, dict) else ():
        try:
            out[str(name)] = parse_quantity(raw)
        except (QuantityError, TypeError):
            continue
    return out


def container_resources(container: JsonView, which: str) -> Resources:
    """`requests` or `limits` of one container (requests default to limits, as kube defaults them)."""
    got = _list(container, which)
    if which == "requests":
        for name, q in _list(container, "limits").items():
            got.setdefault(name, q)
    return got


def _containers(spec: JsonView, field: str) -> list[JsonView]:
    items = spec.get(field)
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def pod_resources(spec: JsonView, which: str) -> Resources:
    """The pod's effective `requests` or `limits`."""
    total: Resources = {}
    for container in _containers(spec, "containers"):
        for name, q in container_resources(container, which).items():
            total[name] = total[name] + q if name in total else q
    for container in _containers(spec, "initContainers"):
        for name, q in container_resources(container, which).items():
            if name not in total or q > total[name]:
                total[name] = q
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        for name, raw in overhead.items():
            try:
                q = parse_quantity(raw)
            except (QuantityError, TypeError):
                continue
            total[name] = total[name] + q if name in total else q
    return total


def all_containers(spec: JsonView) -> list[JsonView]:
    return _containers(spec, "initContainers") + _containers(spec, "containers")
