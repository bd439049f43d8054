"""A container's resource limits, and how the shim enforces them: cgroups v2 where available,
else rlimits.

`of` reads the container spec's `resources.limits` into the JSON the run's spec keeps:
`{"memory": bytes, "cpu_millis": millicores}`, each key only when that limit is set.  A zero
limit is none, as in kube; a value that does not parse is left out (the apiserver validated
it; the kubelet must not fail a pod over it).

In the shim, `cgroup` makes the run's cgroup v2 (`cgroupv2.py`) when the hierarchy is mounted
and hands out the controllers the limits need; the container's process joins it (`preexec`),
so the shim's own memory does not count.  Where that is not possible (cgroups v1 or hybrid
without the controllers in the v2 part, or no permission), the limits become rlimits of the
container's process, set between fork and exec:

- memory → RLIMIT_DATA.  Since Linux 4.7 it counts the private writable mappings (heap, anonymous
  mmap: what a program allocates), so an allocation past it fails as kube's limit would stop
  it.  RLIMIT_AS would also count code, shared libraries and address space reserved but never
  touched, and breaks programs that reserve big regions up front (Go, JVMs, sanitizers).
  RLIMIT_RSS is ignored by Linux.  Unlike a cgroup, an rlimit binds each process alone (a
  container's children each get the whole amount) and the program sees a failed allocation
  (Python: MemoryError, exit 1: reason Error), not an OOM kill.
- cpu → not applied: there is no rlimit for a rate (RLIMIT_CPU kills after N cpu-seconds,
  which is not kube's throttling); `describe` says so.

`describe` is what the shim records in the run's `state.json`: which mechanism was used, the
cgroup's path, and the limits left unapplied.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from components.kubelet import cgroupv2
from machinery.quantity import parse_or_none

MEMORY, CPU = "memory", "cpu_millis"
MOUNTINFO = Path("/proc/self/mountinfo")


def of(container: Mapping[str, Any]) -> dict[str, int]:
    """The limits to apply to `container` (JSON, kept in the run's spec); {}: none."""
    resources = container.get("resources")
    limits = resources.get("limits") if isinstance(resources, Mapping) else None
    if not isinstance(limits, Mapping):
        return {}
    out: dict[str, int] = {}
    memory = parse_or_none(limits.get("memory"))
    if memory is not None:
        out[MEMORY] = math.ceil(memory.value)  # whole bytes, rounded up as kube's Value()
    cpu = parse_or_none(limits.get("cpu"))
    if cpu is not None:
        out[CPU] = cpu.milli_value()
    return {k: v for k, v in out.items() if v > 0}


def _positive(limits: Mapping[str, Any], key: str) -> int | None:
    """A limit from the run's spec (JSON read back: checked, not trusted)."""
    value = limits.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def cgroup(limits: Mapping[str, Any], name: str, mountinfo: Path = MOUNTINFO) -> Path | None:
    """The run's cgroup v2 `name` made with `limits` in it; None when there are no limits or
    cgroup v2 cannot enforce them here (then `preexec` sets rlimits)."""
    memory, cpu = _positive(limits, MEMORY), _positive(limits, CPU)
    if memory is None and cpu is None:
        return None
    try:
        top = cgroupv2.mount_point(mountinfo.read_text())
        return cgroupv2.create(top, name, memory, cpu) if top is not None else None
    except OSError:
        return None


def rlimits(limits: Mapping[str, Any]) -> list[tuple[int, int]]:
    """The (resource, value) rlimits standing in for `limits` without cgroups (see above)."""
    memory = _positive(limits, MEMORY)
    return [(resource.RLIMIT_DATA, memory)] if memory is not None else []


def preexec(limits: Mapping[str, Any], cgroup: Path | None) -> Callable[[], None] | None:
    """What the container's process runs between fork and exec to come under its limits: join
    its cgroup, or set its rlimits (None: nothing to do)."""
    if cgroup is not None:
        return lambda: cgroupv2.join(cgroup, os.getpid())
    settings = rlimits(limits)
    if not settings:
        return None

    def apply() -> None:
        for which, value in settings:
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)  # a tighter limit already in force stays
            resource.setrlimit(which, (value, value))  # hard too: the container cannot lift it

    return apply


def describe(limits: Mapping[str, Any], cgroup: Path | None) -> dict[str, Any]:
    """How the run's limits were enforced, for its state file."""
    if cgroup is not None:
        return {"mechanism": "cgroup2", "cgroup": str(cgroup)}
    if _positive(limits, MEMORY) is None and _positive(limits, CPU) is None:
        return {"mechanism": "none"}
    unapplied = ["cpu"] if _positive(limits, CPU) is not None else []
    return {"mechanism": "rlimit", "notApplied": unapplied}


def release(cgroup: Path | None) -> bool:
    """After the container ended: whether the kernel OOM-killed in its cgroup; the cgroup is
    removed.  False without a cgroup (an rlimit shows as a failed allocation instead)."""
    if cgroup is None:
        return False
    killed = cgroupv2.oom_kills(cgroup) > 0
    cgroupv2.remove(cgroup)
    return killed
