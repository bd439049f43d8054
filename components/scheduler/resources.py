"""What a pod asks for and what a node offers, in the units the scheduler adds up.

cpu in millicores, memory (and ephemeral storage) in bytes, pods as a count, and every scalar
resource (extended ones such as `example.com/gpu`, `hugepages-*`, `attachable-volumes-*`: see
machinery.resourcenames) in whole units by name, as kube's Resource.ScalarResources.  A pod's request is
machinery.podresources' (kube's PodRequests: sidecars, init containers, overhead), taken here
into these units; the scheduler keeps no rule of its own, so what it fits on a node is what
quota charges for the same pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from machinery import podresources
from machinery.objects import as_dict
from machinery.quantity import NANOS_PER_UNIT, Quantity, QuantityError, parse_quantity
from machinery.resourcenames import is_scalar

# kube's non-zero defaults, used only for scoring a pod that requests nothing
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_NON_ZERO_DEFAULTS = {
    "cpu": parse_quantity(f"{DEFAULT_MILLI_CPU_REQUEST}m"),
    "memory": parse_quantity(DEFAULT_MEMORY_REQUEST),
}


# the names with a field of their own (pods: `NodeInfo.allowed_pods`); every other name is a scalar or ignored
_FIELDS = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})

Scalars = tuple[tuple[str, int], ...]
"""Scalar resources as (name, amount), sorted by name, no zero amounts (absent and zero are the
same: a node without the resource offers none of it).  A tuple, so a pod's requests stay
hashable and comparable, which the fit memo keys on."""


def _combine(a: Scalars, b: Scalars, sign: int) -> Scalars:
    if not b:
        return a
    if not a and sign > 0:
        return b
    total = dict(a)
    for name, amount in b:
        total[name] = total.get(name, 0) + sign * amount
    return tuple(sorted(item for item in total.items() if item[1]))


@dataclass(frozen=True, slots=True)
class Resources:
    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    scalars: Scalars = ()

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.milli_cpu + other.milli_cpu,
            self.memory + other.memory,
            self.ephemeral_storage + other.ephemeral_storage,
            _combine(self.scalars, other.scalars, 1),
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.milli_cpu - other.milli_cpu,
            self.memory - other.memory,
            self.ephemeral_storage - other.ephemeral_storage,
            _combine(self.scalars, other.scalars, -1),
        )

    def scalar(self, name: str) -> int:
        for have, amount in self.scalars:
            if have == name:
                return amount
        return 0


ZERO = Resources()


def _whole(q: Quantity) -> int:
    return -(-q.nanos // NANOS_PER_UNIT)  # rounded up, as kube's Value()


def _value(raw: Any, milli: bool) -> int:
    try:
        q = parse_quantity(raw)
    except QuantityError:
        return 0
    return q.milli_value() if milli else _whole(q)


def _scalars(amounts: Mapping[str, int]) -> Scalars:
    return tuple(sorted((name, n) for name, n in amounts.items() if n and name not in _FIELDS and is_scalar(name)))


def resources_of(amounts: Mapping[str, Any] | None) -> Resources:
    """cpu, memory, ephemeral-storage and the scalars of an `allocatable` map (absent = 0)."""
    if not amounts:
        return ZERO
    return Resources(
        _value(amounts["cpu"], True) if "cpu" in amounts else 0,
        _value(amounts["memory"], False) if "memory" in amounts else 0,
        _value(amounts["ephemeral-storage"], False) if "ephemeral-storage" in amounts else 0,
        _scalars({name: _value(raw, False) for name, raw in amounts.items() if name not in _FIELDS}),
    )


def pods_of(amounts: Mapping[str, Any] | None) -> int:
    if not amounts or "pods" not in amounts:
        return 0
    return _value(amounts["pods"], False)


def _in_units(amounts: Mapping[str, Quantity]) -> Resources:
    cpu, memory, storage = (amounts.get(name) for name in ("cpu", "memory", "ephemeral-storage"))
    return Resources(
        cpu.milli_value() if cpu else 0,
        _whole(memory) if memory else 0,
        _whole(storage) if storage else 0,
        _scalars({name: _whole(q) for name, q in amounts.items() if name not in _FIELDS}),
    )


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """What the pod takes of a node: machinery.podresources' rule, which quota charges too."""
    return _in_units(podresources.pod_requests(as_dict(pod.get("spec"))))


def non_zero_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(milli cpu, memory) for scoring: a container (init containers and sidecars too) that
    states no cpu or memory request counts kube's defaults for it, so a node full of pods that
    request nothing does not score as empty."""
    r = _in_units(podresources.pod_requests(as_dict(pod.get("spec")), non_missing=_NON_ZERO_DEFAULTS))
    return r.milli_cpu, r.memory
