"""LimitRanger: a namespace's LimitRanges default and bound what its pods ask for.

Mutating (as kube's plugin): a container without a limit or request for a resource that a
`type: Container` item defaults gets the item's `default` / `defaultRequest`, and the pod is
annotated with what was set.  Validating: every container within min/max and
maxLimitRequestRatio, and the pod's totals within `type: Pod` items, refused with kube's
words (`maximum cpu usage per Container is 1, but limit is 2`).  Pods only: claims are not
served here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver import errors
from apiserver.admission.by_version import KEPT, ByVersion
from apiserver.admission.interface import AdmissionRequest, is_pod_create
from machinery.objects import Obj
from machinery.podresources import all_containers, container_resources, pod_limits, pod_requests
from machinery.qos import qos_class
from machinery.quantity import Quantity, QuantityError, canonical, parse_quantity

ANNOTATION = "kubernetes.io/limit-ranger"
# namespace -> the LimitRange objects in it
LimitRanges = Callable[[str], Iterable[Obj]]


@dataclass(frozen=True, slots=True)
class RangeItem:
    """One `spec.limits` item with its quantities parsed (once per LimitRange version, not
    once per pod: a namespace's pods all read the same few items)."""

    type: str
    default: dict[str, str]  # in canonical form, as they are written into containers
    default_request: dict[str, str]
    min: dict[str, Quantity]
    max: dict[str, Quantity]
    ratio: dict[str, Quantity]


def compile_item(item: Mapping[str, Any]) -> RangeItem:
    return RangeItem(
        str(item.get("type")),
        {name: canonical(q) for name, q in _quantities(item, "default").items()},
        {name: canonical(q) for name, q in _quantities(item, "defaultRequest").items()},
        _quantities(item, "min"),
        _quantities(item, "max"),
        _quantities(item, "maxLimitRequestRatio"),
    )


def compile_range(limit_range: Mapping[str, Any]) -> list[RangeItem]:
    spec = limit_range.get("spec")
    limits = spec.get("limits") if isinstance(spec, Mapping) else None
    return [compile_item(i) for i in (limits if isinstance(limits, list) else []) if isinstance(i, Mapping)]


class CompiledRanges:
    """Each LimitRange's items, compiled when a version of it is first seen."""

    def __init__(self, keep: int = KEPT) -> None:
        self._compiled = ByVersion(compile_range, keep)

    def items(self, ranges: Iterable[Obj]) -> list[RangeItem]:
        return [item for lr in ranges for item in self._compiled(lr)]


def _of_type(items: list[RangeItem], kind: str) -> list[RangeItem]:
    return [i for i in items if i.type == kind]


def _quantities(item: Mapping[str, Any], field: str) -> dict[str, Quantity]:
    values = item.get(field)
    out: dict[str, Quantity] = {}
    for name, raw in values.items() if isinstance(values, Mapping) else ():
        try:
            out[str(name)] = parse_quantity(raw)
        except (QuantityError, TypeError):
            continue
    return out


def apply_defaults(pod: Obj, items: list[RangeItem]) -> list[str]:
    """Set default limits and requests in place; what was set, for the annotation."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return []
    notes: list[str] = []
    defaults: dict[str, dict[str, str]] = {"limits": {}, "requests": {}}
    for item in items:  # the first item that defaults a resource wins
        for name, text in item.default.items():
            defaults["limits"].setdefault(name, text)
        for name, text in item.default_request.items():
            defaults["requests"].setdefault(name, text)
    for container in all_containers(spec):
        assert isinstance(container, dict)
        for field, word in (("limits", "limit"), ("requests", "request")):
            wanted = defaults[field]
            resources = container.setdefault("resources", {})
            if not isinstance(resources, dict):
                continue
            current = resources.get(field) or {}
            if not isinstance(current, dict):
                continue
            # (a limit the pod set itself became its request at defaulting, before admission)
            added = sorted(n for n in wanted if n not in current)
            if added:
                resources[field] = {**current, **{n: wanted[n] for n in added}}
                notes.append(f"{', '.join(added)} {word} for container {container.get('name', '')}")
    return notes


def violations(pod: Obj, container_items: list[RangeItem], pod_items: list[RangeItem]) -> list[str]:
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return []
    out: list[str] = []
    for item in container_items:
        for container in all_containers(spec):
            out += _check(
                "Container", item, container_resources(container, "requests"), container_resources(container, "limits")
            )
    if pod_items:
        # kube's LimitRanger bounds what the containers ask for: sidecars counted, overhead not
        requests, limits = pod_requests(spec, overhead=False), pod_limits(spec, overhead=False)
        for item in pod_items:
            out += _check("Pod", item, requests, limits)
    return out


def _check(kind: str, item: RangeItem, requests: dict[str, Quantity], limits: dict[str, Quantity]) -> list[str]:
    """kube's min / max / ratio constraints: at most one complaint per resource and bound."""
    out: list[str] = []
    for name, low in sorted(item.min.items()):
        request, limit = requests.get(name), limits.get(name)
        if request is None:
            out.append(f"minimum {name} usage per {kind} is {canonical(low)}.  No request is specified")
        elif request < low:
            out.append(f"minimum {name} usage per {kind} is {canonical(low)}, but request is {canonical(request)}")
        elif limit is not None and limit < low:
            out.append(f"minimum {name} usage per {kind} is {canonical(low)}, but limit is {canonical(limit)}")
    for name, high in sorted(item.max.items()):
        request, limit = requests.get(name), limits.get(name)
        if limit is None:
            out.append(f"maximum {name} usage per {kind} is {canonical(high)}.  No limit is specified")
        elif limit > high:
            out.append(f"maximum {name} usage per {kind} is {canonical(high)}, but limit is {canonical(limit)}")
        elif request is not None and request > high:
            out.append(f"maximum {name} usage per {kind} is {canonical(high)}, but request is {canonical(request)}")
    for name, ratio in sorted(item.ratio.items()):
        request, limit = requests.get(name), limits.get(name)
        prefix = f"{name} max limit to request ratio per {kind} is {canonical(ratio)}, but"
        if limit is None or limit.is_zero():
            out.append(f"{prefix} no limit is specified or limit is 0")
        elif request is None or request.is_zero():
            out.append(f"{prefix} no request is specified or request is 0")
        elif limit.milli_value() / request.milli_value() > float(ratio.value):
            out.append(f"{prefix} provided ratio is {limit.milli_value() / request.milli_value():f}")
    return out


class LimitRanger:
    name = "LimitRanger"

    def __init__(self, ranges: LimitRanges) -> None:
        self._ranges = ranges
        self._compiled = CompiledRanges()

    def handles(self, request: AdmissionRequest) -> bool:
        return is_pod_create(request)

    async def admit(self, request: AdmissionRequest) -> None:
        assert request.object is not None and request.namespace
        items = _of_type(self._compiled.items(self._ranges(request.namespace)), "Container")
        if not items:
            return
        notes = apply_defaults(request.object, items)
        if notes:
            meta = request.object.setdefault("metadata", {})
            annotations = meta.setdefault("annotations", {})
            if isinstance(annotations, dict):
                annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)
            _refresh_qos(request.object)

    async def validate(self, request: AdmissionRequest) -> None:
        assert request.object is not None and request.namespace
        items = self._compiled.items(self._ranges(request.namespace))
        if not items:
            return
        found = violations(request.object, _of_type(items, "Container"), _of_type(items, "Pod"))
        if found:
            text = found[0] if len(found) == 1 else "[" + ", ".join(found) + "]"
            raise errors.forbidden(f'pods "{request.name}" is forbidden: {text}')


def _refresh_qos(pod: Obj) -> None:
    """The QoS class was computed at defaulting, before the limits were set here."""
    status = pod.get("status")
    spec = pod.get("spec")
    if isinstance(status, dict) and isinstance(spec, dict):
        status["qosClass"] = qos_class(spec)
