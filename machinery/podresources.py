"""What a pod asks for: its effective requests and limits per resource, the one rule
(component-helpers' resource.PodRequests and PodLimits) that the scheduler fits pods by, quota
charges and recounts, and LimitRange bounds.  Were it written twice, a pod the scheduler places
could be charged a different amount by quota than the node was charged.

Per resource, the rule follows how the containers run (KEP 753, sidecar containers): regular
containers and sidecars (init containers with `restartPolicy: Always`) run together to the end,
so they add up; a plain init container runs alone, beside only the sidecars started before it.
The pod needs the larger of the two, plus its overhead (the runtime's own cost): added to every
request, and to a limit only where a non-zero one is set (no limit stays no limit).

Requests default to limits per container, as the apiserver defaults them.  Quantities that do
not parse count as nothing: validation refuses them before any plugin that counts them runs.
Objects are decoded JSON, so a mapping is a dict (the cheap isinstance: this runs several times
per container of every pod create and every pod the scheduler sees).

Pod-level resources (`spec.resources`, KEP 2837) are not served, so not counted here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from machinery.quantity import Quantity, QuantityError, parse_quantity

# a pod spec or container as decoded (a machinery.objects.Obj), only read here
JsonView = Mapping[str, Any]
Resources = dict[str, Quantity]


def _list(values: object) -> Resources:
    out: Resources = {}
    for name, raw in values.items() if isinstance(values, dict) else ():
        try:
            out[str(name)] = parse_quantity(raw)
        except (QuantityError, TypeError):
            continue
    return out


def _stated(container: JsonView, which: str) -> Resources:
    resources = container.get("resources")
    return _list(resources.get(which) if isinstance(resources, dict) else None)


def container_resources(container: JsonView, which: str) -> Resources:
    """`requests` or `limits` of one container (requests default to limits, as kube defaults them)."""
    got = _stated(container, which)
    if which == "requests":
        for name, q in _stated(container, "limits").items():
            got.setdefault(name, q)
    return got


def _containers(spec: JsonView, field: str) -> list[JsonView]:
    items = spec.get(field)
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def all_containers(spec: JsonView) -> list[JsonView]:
    return _containers(spec, "initContainers") + _containers(spec, "containers")


def is_sidecar(container: JsonView) -> bool:
    """A restartable init container: it keeps running beside the regular containers."""
    return container.get("restartPolicy") == "Always"


def _add(into: Resources, more: Resources) -> None:
    for name, q in more.items():
        into[name] = into[name] + q if name in into else q


def _raise(into: Resources, other: Resources) -> None:
    for name, q in other.items():
        if name not in into or q > into[name]:
            into[name] = q


def _aggregate(spec: JsonView, amounts: Callable[[JsonView], Resources]) -> Resources:
    """max(regular containers + sidecars, each plain init container + the sidecars before it)."""
    total: Resources = {}
    for container in _containers(spec, "containers"):
        _add(total, amounts(container))
    sidecars: Resources = {}  # the sidecars started so far
    init_peak: Resources = {}  # the most any step of the init sequence needs at once
    for container in _containers(spec, "initContainers"):
        own = amounts(container)
        if is_sidecar(container):
            _add(total, own)
            _add(sidecars, own)
            _raise(init_peak, sidecars)
        else:
            alongside = dict(own)
            _add(alongside, sidecars)
            _raise(init_peak, alongside)
    _raise(total, init_peak)
    return total


def _overhead(spec: JsonView) -> Resources:
    return _list(spec.get("overhead"))


def pod_requests(
    spec: JsonView, *, overhead: bool = True, non_missing: Mapping[str, Quantity] | None = None
) -> Resources:
    """The pod's effective requests.

    `overhead=False` leaves the pod overhead out (LimitRange bounds the containers only).
    `non_missing` stands in for a request a container does not state at all (one stated as zero
    stays zero): the scheduler scores a pod that requests nothing as if it asked for defaults."""

    def requests(container: JsonView) -> Resources:
        got = container_resources(container, "requests")
        for name, q in (non_missing or {}).items():
            got.setdefault(name, q)
        return got

    total = _aggregate(spec, requests)
    if overhead:
        _add(total, _overhead(spec))
    return total


def pod_limits(spec: JsonView, *, overhead: bool = True) -> Resources:
    """The pod's effective limits; a resource no container limits is absent (unbounded)."""
    total = _aggregate(spec, lambda container: container_resources(container, "limits"))
    if overhead:
        for name, q in _overhead(spec).items():
            if name in total and not total[name].is_zero():
                total[name] = total[name] + q
    return total
