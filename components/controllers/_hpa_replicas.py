"""The HorizontalPodAutoscaler's arithmetic, pure: a metric's replica proposal, the
stabilization of proposals over time, and the rate limits of `behavior` (kube's
replica_calculator.go and horizontal.go, for Resource metrics of cpu and memory).

- proposal: the pods' usage against their requests (Utilization) or per pod (AverageValue);
  within TOLERANCE of the target, the current count stays, else ceil(ratio x pods measured).
- stabilization: the highest proposal of the scale-down window and the lowest of the
  scale-up window bound the result, so a brief dip does not scale down (5 minutes by default).
- rate: each policy allows so many pods (or percent) a period, counted from the replicas the
  period began with (the scale events kept); `selectPolicy` picks the most (Max), least (Min)
  or no change (Disabled).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from machinery.autoscaling import DOWN_STABILIZATION_S, SCALE_DOWN, SCALE_UP, TOLERANCE
from machinery.objects import Obj
from machinery.quantity import QuantityError, parse_quantity

Event = tuple[float, int]  # (when, replicas added or removed)


class MetricError(Exception):
    """Why a metric gives no proposal, in kube's words (the ScalingActive condition's message)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Proposal:
    replicas: int
    current: Obj
    """The metric's entry of status.currentMetrics."""


def _amount(value: Any) -> Fraction:
    try:
        return parse_quantity(value).value
    except (QuantityError, TypeError, ValueError):
        return Fraction(0)


def resource_proposal(metric: Obj, pods: Iterable[Obj], usage: Mapping[str, Obj], current_replicas: int) -> Proposal:
    """The replicas a Resource metric asks for, from the pods the target selects and their
    PodMetrics by pod name (`usage`); MetricError when it cannot tell."""
    source = metric.get("resource") or {}
    name, target = str(source.get("name") or ""), source.get("target") or {}
    used = requested = Fraction(0)
    measured = 0
    for pod in pods:
        pod_name = str((pod.get("metadata") or {}).get("name") or "")
        metrics = usage.get(pod_name)
        if metrics is None:
            continue
        for container in (pod.get("spec") or {}).get("containers") or ():
            request = ((container.get("resources") or {}).get("requests") or {}).get(name)
            if target.get("type") == "Utilization" and request is None:
                raise MetricError(
                    "FailedGetResourceMetric",
                    f"failed to get {name} utilization: missing request for {name} in container "
                    f"{container.get('name')} of Pod {pod_name}",
                )
            requested += _amount(request) if request is not None else 0
        used += sum((_amount((c.get("usage") or {}).get(name)) for c in metrics.get("containers") or ()), Fraction(0))
        measured += 1
    if measured == 0:
        raise MetricError(
            "FailedGetResourceMetric",
            f"failed to get {name} utilization: did not receive metrics for targeted pods (pods might be unready)",
        )
    if target.get("type") == "Utilization":
        if requested <= 0:
            raise MetricError("FailedGetResourceMetric", f"failed to get {name} utilization: no requests")
        utilization = used * 100 / requested
        ratio = utilization / Fraction(int(target.get("averageUtilization") or 0) or 1)
        current = {"averageUtilization": int(utilization), "averageValue": _quantity(used / measured, name)}
    else:
        wanted = _amount(target.get("averageValue"))
        if wanted <= 0:
            raise MetricError("InvalidMetricSourceType", f"the {name} target has no averageValue")
        ratio = (used / measured) / wanted
        current = {"averageValue": _quantity(used / measured, name)}
    replicas = current_replicas if abs(1 - ratio) <= TOLERANCE else math.ceil(ratio * measured)
    return Proposal(replicas, {"type": "Resource", "resource": {"name": name, "current": current}})


def _quantity(value: Fraction, name: str) -> str:
    """cpu in millicores ("250m"), anything else in whole units, as kube writes currentMetrics."""
    if name == "cpu":
        return f"{math.ceil(value * 1000)}m"
    return str(math.ceil(value))


def stabilize(
    history: list[Event], proposal: int, current: int, now: float, up_window: float, down_window: float
) -> int:
    """The proposal bounded by the lowest of the scale-up window and the highest of the
    scale-down window (`history`: earlier proposals, (when, replicas))."""
    up = min([r for t, r in history if t > now - up_window] + [proposal])
    down = max([r for t, r in history if t > now - down_window] + [proposal])
    return min(max(current, up), down)


def _changed_within(events: list[Event], period: float, now: float) -> int:
    return sum(n for t, n in events if t > now - period)


def _limit(current: int, ups: list[Event], downs: list[Event], rules: Obj, now: float, up: bool) -> int:
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    limits = []
    for policy in rules.get("policies") or ():
        period = float(policy.get("periodSeconds") or 15)
        start = current - _changed_within(ups, period, now) + _changed_within(downs, period, now)
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            limits.append(start + value if up else start - value)
        else:
            limits.append(math.ceil(start * (1 + value / 100)) if up else math.ceil(start * (1 - value / 100)))
    if not limits:
        return current
    most = max if up else min  # Max: the policy allowing the biggest change
    return (most if select == "Max" else (min if up else max))(limits)


@dataclass(frozen=True)
class Decision:
    replicas: int
    limited: str
    """Why the count was bounded ("" when it was not): TooFewReplicas, TooManyReplicas,
    ScaleUpLimit, ScaleDownLimit (the ScalingLimited condition's reason)."""


def decide(
    proposal: int,
    current: int,
    minimum: int,
    maximum: int,
    behavior: Obj | None,
    history: list[Event],
    ups: list[Event],
    downs: list[Event],
    now: float,
) -> Decision:
    """The replicas to scale to: the proposal stabilized, rate-limited and within min..max."""
    behavior = behavior or {}
    # what a behavior leaves out is kube's default (the apiserver fills it in too)
    up_rules = {**SCALE_UP, **(behavior.get("scaleUp") or {})}
    down_rules = {**SCALE_DOWN, **(behavior.get("scaleDown") or {})}
    up_window = float(up_rules.get("stabilizationWindowSeconds") or 0)
    down_window = down_rules.get("stabilizationWindowSeconds")
    down_window = float(DOWN_STABILIZATION_S if down_window is None else down_window)
    wanted = stabilize(history, proposal, current, now, up_window, down_window)
    if wanted > current:
        limit = max(_limit(current, ups, downs, up_rules, now, up=True), current)
        ceiling, why = (limit, "ScaleUpLimit") if limit < maximum else (maximum, "TooManyReplicas")
        return Decision(ceiling, why) if wanted > ceiling else Decision(max(wanted, minimum), "")
    if wanted < current:
        limit = min(_limit(current, ups, downs, down_rules, now, up=False), current)
        floor, why = (limit, "ScaleDownLimit") if limit > minimum else (minimum, "TooFewReplicas")
        return Decision(floor, why) if wanted < floor else Decision(min(wanted, maximum), "")
    if current < minimum:
        return Decision(minimum, "TooFewReplicas")
    if current > maximum:
        return Decision(maximum, "TooManyReplicas")
    return Decision(current, "")
