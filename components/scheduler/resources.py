"""What a pod asks for and what a node offers, in the units the scheduler adds up.

cpu in millicores, memory (and ephemeral storage) in bytes, pods as a count.  A pod's request is
kube's: per resource, the larger of the sum of its app containers' requests (plus sidecars, i.e.
restartable init containers) and the largest request of a plain init container, plus overhead.
A container that sets a limit but no request requests its limit (the apiserver defaults it so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from machinery.quantity import QuantityError, parse_quantity

# kube's non-zero defaults, used only for scoring a pod that requests nothing
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Resources:
    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.milli_cpu + other.milli_cpu,
            self.memory + other.memory,
            self.ephemeral_storage + other.ephemeral_storage,
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.milli_cpu - other.milli_cpu,
            self.memory - other.memory,
            self.ephemeral_storage - other.ephemeral_storage,
        )

    def max(self, other: Resources) -> Resources:
        return Resources(
            max(self.milli_cpu, other.milli_cpu),
            max(self.memory, other.memory),
            max(self.ephemeral_storage, other.ephemeral_storage),
        )


ZERO = Resources()


def _value(raw: Any, milli: bool) -> int:
    try:
        q = parse_quantity(raw)
    except QuantityError:
        return 0
    if milli:
        return q.milli_value()
    v = q.value
    return -((-v.numerator) // v.denominator)  # round up, as kube's Value()


def resources_of(amounts: Mapping[str, Any] | None) -> Resources:
    """cpu, memory and ephemeral-storage of a `requests`/`allocatable` map (absent = 0)."""
    if not amounts:
        return ZERO
    return Resources(
        _value(amounts["cpu"], True) if "cpu" in amounts else 0,
        _value(amounts["memory"], False) if "memory" in amounts else 0,
        _value(amounts["ephemeral-storage"], False) if "ephemeral-storage" in amounts else 0,
    )


def pods_of(amounts: Mapping[str, Any] | None) -> int:
    if not amounts or "pods" not in amounts:
        return 0
    return _value(amounts["pods"], False)


def container_requests(container: Mapping[str, Any]) -> Resources:
    res = container.get("resources") or {}
    requests = dict(res.get("limits") or {})
    requests.update(res.get("requests") or {})
    return resources_of(requests)


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    spec = pod.get("spec") or {}
    total = ZERO
    for c in spec.get("containers") or ():
        total += container_requests(c)
    init_max = ZERO
    sidecars = ZERO
    for c in spec.get("initContainers") or ():
        req = container_requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars += req
            init_max = init_max.max(sidecars)
        else:
            init_max = init_max.max(sidecars + req)
    total = (total + sidecars).max(init_max)
    return total + resources_of(spec.get("overhead"))


def non_zero_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(milli cpu, memory) for scoring: a container requesting nothing counts kube's defaults."""
    cpu = mem = 0
    for c in (pod.get("spec") or {}).get("containers") or ():
        r = container_requests(c)
        cpu += r.milli_cpu or DEFAULT_MILLI_CPU_REQUEST
        mem += r.memory or DEFAULT_MEMORY_REQUEST
    return cpu, mem
