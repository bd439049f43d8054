"""A PodDisruptionBudget's status worked out from the pods it selects (kube's disruption
controller arithmetic), as pure functions the controller and the tests call.

Why pure: the numbers decide whether a drain may take a pod down, so every rule (percent rounding,
the `disruptedPods` grace, the safe answer when the budget cannot be worked out) is checked here
without a cluster.  `now` is epoch seconds, given by the caller.  Every field is read defensively:
a PDB or pod of the wrong shape yields a `BudgetError` (the PDB's SyncFailed condition) or counts
as "not healthy", never an exception the controller would loop on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from machinery.objects import Obj, as_dict
from machinery.pods import is_ready, is_terminating
from machinery.timestamps import format_time, parse_time

# How long an eviction's entry in `disruptedPods` keeps its pod out of the healthy count while the
# pod is not yet seen deleting (kube's DeletionTimeout).
DELETION_TIMEOUT_S = 120.0
CONDITION = "DisruptionAllowed"
SUFFICIENT = "SufficientPods"
INSUFFICIENT = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
_PERCENT = re.compile(r"([0-9]+)%")


class BudgetError(Exception):
    """The budget cannot be worked out; the message becomes the SyncFailed condition's."""


@dataclass(frozen=True, slots=True)
class Computed:
    """The status to hold, when to look again (an entry of `disruptedPods` expires), and why the
    budget could not be worked out (None when it could)."""

    status: Obj
    recheck_at: float | None
    failed: str | None = None


# -- small readers ----------------------------------------------------------------------------


def _count(value: Any) -> int:
    """A non-negative integer field, 0 when absent or of the wrong type."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


# -- expectedPods and desiredHealthy ----------------------------------------------------------


def scaled(value: Any, total: int, field: str) -> int:
    """An IntOrString against `total`, a percent rounded up (kube's GetScaledValueFromIntOrPercent
    with roundUp): 34% of 3 is 2, not 1."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise BudgetError(f"{field}: invalid value {value}: must be greater than or equal to 0")
        return value
    if isinstance(value, str):
        m = _PERCENT.fullmatch(value)
        if m is not None:
            return math.ceil(int(m.group(1)) * total / 100)
    raise BudgetError(f"{field}: invalid value {value!r}: must be an integer or a percentage such as '50%'")


def needs_scale(spec: Mapping[str, Any]) -> bool:
    """Whether expectedPods comes from the pods' controllers (anything but an integer minAvailable)."""
    if spec.get("maxUnavailable") is not None:
        return True
    minimum = spec.get("minAvailable")
    return minimum is not None and not (isinstance(minimum, int) and not isinstance(minimum, bool))


def expected_and_desired(spec: Mapping[str, Any], matched: int, scale: Callable[[], int]) -> tuple[int, int]:
    """(expectedPods, desiredHealthy).  An integer minAvailable counts the selected pods; a percent
    or maxUnavailable counts the replicas the pods' controllers want (`scale`, which raises
    BudgetError when a pod's controller cannot be found).  Neither set: (0, 0), as kube."""
    max_unavailable = spec.get("maxUnavailable")
    min_available = spec.get("minAvailable")
    if max_unavailable is not None:
        expected = scale()
        return expected, max(0, expected - scaled(max_unavailable, expected, "spec.maxUnavailable"))
    if min_available is None:
        return 0, 0
    if isinstance(min_available, int) and not isinstance(min_available, bool):
        return matched, scaled(min_available, matched, "spec.minAvailable")
    expected = scale()
    return expected, scaled(min_available, expected, "spec.minAvailable")


# -- healthy pods, and evictions not yet seen -------------------------------------------------


def live_disruptions(held: Any, pods: Iterable[Mapping[str, Any]], now: float) -> tuple[dict[str, Any], float | None]:
    """The `disruptedPods` entries to keep: the pod is still there, not yet deleting, and its
    eviction is under DELETION_TIMEOUT_S old.  Also when the first kept entry expires."""
    entries = as_dict(held)
    kept: dict[str, Any] = {}
    recheck: float | None = None
    for pod in pods:
        name = as_dict(pod.get("metadata")).get("name")
        if not isinstance(name, str) or name not in entries or is_terminating(pod):
            continue
        at = parse_time(entries[name])
        if at is None or at + DELETION_TIMEOUT_S < now:
            continue
        kept[name] = entries[name]
        expiry = at + DELETION_TIMEOUT_S
        recheck = expiry if recheck is None else min(recheck, expiry)
    return kept, recheck


def current_healthy(pods: Iterable[Mapping[str, Any]], disrupted: Mapping[str, Any]) -> int:
    """Ready pods that are neither deleting nor evicted-but-not-yet-deleting."""
    return sum(
        1
        for pod in pods
        if not is_terminating(pod) and as_dict(pod.get("metadata")).get("name") not in disrupted and is_ready(pod)
    )


def disruptions_allowed(healthy: int, desired: int, expected: int) -> int:
    """healthy - desired, never negative; 0 while no pod is expected (a budget whose first pods
    appear before it is recounted must not allow anything)."""
    return max(0, healthy - desired) if expected > 0 else 0


# -- conditions and the whole status ----------------------------------------------------------


def with_condition(held: Any, status: str, reason: str, message: str, generation: int, now: float) -> list[Obj]:
    """The conditions with DisruptionAllowed set (kube's SetStatusCondition): its
    lastTransitionTime moves only when its status changes; other conditions are kept."""
    conditions = [dict(c) for c in held if isinstance(c, dict)] if isinstance(held, list) else []
    cond: Obj = {"type": CONDITION, "status": status, "reason": reason, "message": message}
    if generation:
        cond["observedGeneration"] = generation
    for i, old in enumerate(conditions):
        if old.get("type") == CONDITION:
            same = old.get("status") == status and isinstance(old.get("lastTransitionTime"), str)
            cond["lastTransitionTime"] = old["lastTransitionTime"] if same else format_time(now)
            conditions[i] = _ordered(cond)
            return conditions
    cond["lastTransitionTime"] = format_time(now)
    conditions.append(_ordered(cond))
    return conditions


def _ordered(cond: Obj) -> Obj:
    keys = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")
    return {k: cond[k] for k in keys if k in cond}


def generation_of(pdb: Mapping[str, Any]) -> int:
    return _count(as_dict(pdb.get("metadata")).get("generation"))


def compute(pdb: Mapping[str, Any], pods: list[Obj], now: float, scale: Callable[[list[Obj]], int]) -> Computed:
    """The status the PDB should hold given the pods it selects.  When the budget cannot be worked
    out (a pod's controller is unknown, a malformed spec) the held status is kept but
    disruptionsAllowed is 0 and DisruptionAllowed is False/SyncFailed (kube's failSafe)."""
    held = as_dict(pdb.get("status"))
    spec = as_dict(pdb.get("spec"))
    generation = generation_of(pdb)
    try:
        expected, desired = expected_and_desired(spec, len(pods), lambda: scale(pods))
    except BudgetError as e:
        failed = dict(held)
        failed["disruptionsAllowed"] = 0
        failed["conditions"] = with_condition(
            held.get("conditions"), "False", SYNC_FAILED, str(e), _count(held.get("observedGeneration")), now
        )
        return Computed(failed, None, str(e))
    disrupted, recheck = live_disruptions(held.get("disruptedPods"), pods, now)
    healthy = current_healthy(pods, disrupted)
    allowed = disruptions_allowed(healthy, desired, expected)
    status: Obj = {"observedGeneration": generation}
    if disrupted:
        status["disruptedPods"] = disrupted
    status.update(
        {"disruptionsAllowed": allowed, "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected}
    )
    if allowed > 0:
        status["conditions"] = with_condition(held.get("conditions"), "True", SUFFICIENT, "", generation, now)
    else:
        status["conditions"] = with_condition(held.get("conditions"), "False", INSUFFICIENT, "", generation, now)
    return Computed(status, recheck)
