"""autoscaling/v2 and autoscaling/v1 HorizontalPodAutoscaler: one stored object, two APIs.

Stored once, under `/registry/horizontalpodautoscalers/`, in the autoscaling/v2 shape (kube's
storage version).  autoscaling/v1 converts on the way in and out, as kube's conversion does:
`targetCPUUtilizationPercentage` is the v2 Resource metric for cpu with an Utilization target,
`status.currentCPUUtilizationPercentage` the matching current metric, and what v1 has no field
for (other metrics, behavior, conditions, current metrics) rides in the
`autoscaling.alpha.kubernetes.io/*` annotations, so a v1 round trip loses nothing.  kubectl 1.31
and 1.32 `autoscale` post v1; 1.33 posts v2 first.

Both versions are defaulted and validated in the v2 shape, so a bad v1 target is reported at
`spec.metrics[0].resource.target.averageUtilization`, as kube (which validates its internal,
v2-shaped type) reports it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.autoscaling import SCALE_DOWN, SCALE_UP
from machinery.objects import Obj, dicts, get, mapping, number, text

SOURCE_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")
_SOURCE_FIELD = {
    "ContainerResource": "containerResource",
    "External": "external",
    "Object": "object",
    "Pods": "pods",
    "Resource": "resource",
}
TARGET_TYPES = ("AverageValue", "Utilization", "Value")
SELECT_POLICIES = ("Disabled", "Max", "Min")
POLICY_TYPES = ("Percent", "Pods")
DEFAULT_CPU_UTILIZATION = 80
ANNOTATIONS = {
    "metrics": "autoscaling.alpha.kubernetes.io/metrics",
    "behavior": "autoscaling.alpha.kubernetes.io/behavior",
    "conditions": "autoscaling.alpha.kubernetes.io/conditions",
    "currentMetrics": "autoscaling.alpha.kubernetes.io/current-metrics",
}


def _cpu_metric(utilization: Any) -> Obj:
    return {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}},
    }


def _is_cpu_utilization(metric: Any) -> bool:
    return (
        isinstance(metric, dict)
        and metric.get("type") == "Resource"
        and get(metric, "resource.name") == "cpu"
        and get(metric, "resource.target.type") == "Utilization"
    )


# -- conversion ---------------------------------------------------------------------------------


def _take_annotation(meta: Obj, which: str) -> Any:
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict) or ANNOTATIONS[which] not in annotations:
        return None
    raw = annotations.pop(ANNOTATIONS[which])
    if not annotations:
        meta.pop("annotations")
    try:
        return json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


def _put_annotation(meta: Obj, which: str, value: Any) -> None:
    if value in (None, [], {}):
        return
    annotations = meta.setdefault("annotations", {})
    if isinstance(annotations, dict):
        annotations[ANNOTATIONS[which]] = json.dumps(value, separators=(",", ":"), sort_keys=True)


def v1_to_v2(hpa: Obj) -> Obj:
    """An autoscaling/v1 HPA in the autoscaling/v2 shape it is stored (and validated) in."""
    out = copy.deepcopy(hpa)
    out["apiVersion"] = "autoscaling/v2"
    meta: Obj = out["metadata"] if isinstance(out.get("metadata"), dict) else {}
    spec = out.get("spec")
    if isinstance(spec, dict):
        metrics: list[Any] = []
        if "targetCPUUtilizationPercentage" in spec:
            metrics.append(_cpu_metric(spec.pop("targetCPUUtilizationPercentage")))
        extra = _take_annotation(meta, "metrics")
        metrics += extra if isinstance(extra, list) else []
        if metrics:
            spec["metrics"] = metrics
        behavior = _take_annotation(meta, "behavior")
        if isinstance(behavior, dict):
            spec["behavior"] = behavior
    status = out.get("status")
    if isinstance(status, dict):
        current = _take_annotation(meta, "currentMetrics")
        current = current if isinstance(current, list) else []
        cpu = status.pop("currentCPUUtilizationPercentage", None)
        if cpu is not None:
            current.insert(0, {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": cpu}}})
        if current:
            status["currentMetrics"] = current
        conditions = _take_annotation(meta, "conditions")
        if isinstance(conditions, list):
            status["conditions"] = conditions
    else:
        for which in ("currentMetrics", "conditions"):
            _take_annotation(meta, which)
    return out


def v2_to_v1(hpa: Obj) -> Obj:
    """A stored (autoscaling/v2) HPA as autoscaling/v1 shows it."""
    out = copy.deepcopy(hpa)
    out["apiVersion"] = "autoscaling/v1"
    meta = out.setdefault("metadata", {})
    meta = meta if isinstance(meta, dict) else {}
    spec = out.get("spec")
    if isinstance(spec, dict):
        metrics = spec.pop("metrics", None)
        others = []
        for metric in metrics if isinstance(metrics, list) else []:
            if _is_cpu_utilization(metric) and "targetCPUUtilizationPercentage" not in spec:
                spec["targetCPUUtilizationPercentage"] = get(metric, "resource.target.averageUtilization")
            else:
                others.append(metric)
        _put_annotation(meta, "metrics", others)
        _put_annotation(meta, "behavior", spec.pop("behavior", None))
    status = out.get("status")
    if isinstance(status, dict):
        current = status.pop("currentMetrics", None)
        others = []
        for metric in current if isinstance(current, list) else []:
            cpu = get(metric, "resource.current.averageUtilization")
            if get(metric, "type") == "Resource" and get(metric, "resource.name") == "cpu" and cpu is not None:
                status.setdefault("currentCPUUtilizationPercentage", cpu)
            else:
                others.append(metric)
        _put_annotation(meta, "currentMetrics", others)
        _put_annotation(meta, "conditions", status.pop("conditions", None))
    return out


# -- defaulting ---------------------------------------------------------------------------------


def _scaling_rules(rules: Any, defaults: Obj) -> Any:
    if rules is None:
        return copy.deepcopy(defaults)
    if isinstance(rules, dict):
        for k, val in defaults.items():
            if rules.get(k) is None:
                rules[k] = copy.deepcopy(val)
    return rules


def default_v2(hpa: Obj) -> None:
    spec = hpa.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _scaling_rules(behavior.get("scaleUp"), SCALE_UP)
        behavior["scaleDown"] = _scaling_rules(behavior.get("scaleDown"), SCALE_DOWN)


def default_v1(hpa: Obj) -> None:
    spec = hpa.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("minReplicas", 1)


def from_storage_v2(hpa: Obj) -> Obj:
    """kube applies v2 defaults when it decodes a stored object: one written through v1 without a
    target reads back with the default cpu metric."""
    spec = hpa.get("spec")
    if isinstance(spec, dict) and not spec.get("metrics"):
        spec["metrics"] = [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
    return hpa


# -- validation ---------------------------------------------------------------------------------


def _validate_target(target: Any, field: str, causes: list[Cause]) -> None:
    t = v.as_dict(target, field, causes)
    kind = t.get("type")
    causes += v.validate_enum(kind, v.child(field, "type"), TARGET_TYPES, optional=False)
    if kind == "Utilization" and t.get("averageUtilization") is None:
        causes.append(
            v.required(
                v.child(field, "averageUtilization"), "must set either a target raw value or a target utilization"
            )
        )
    if kind == "Value" and t.get("value") is None:
        causes.append(
            v.required(v.child(field, "value"), "must set either a target value for metric or a per-pod target")
        )
    if kind == "AverageValue" and t.get("averageValue") is None:
        causes.append(
            v.required(v.child(field, "averageValue"), "must set either a target value for metric or a per-pod target")
        )
    causes += v.validate_positive(t.get("averageUtilization"), v.child(field, "averageUtilization"))


def _validate_metric(metric: Obj, here: str, causes: list[Cause]) -> None:
    kind = metric.get("type")
    if kind in (None, ""):
        causes.append(v.required(v.child(here, "type"), "must specify a metric source type"))
        return
    if kind not in SOURCE_TYPES:
        causes.append(v.not_supported(v.child(here, "type"), kind, SOURCE_TYPES))
        return
    own = _SOURCE_FIELD[kind]
    for other in _SOURCE_FIELD.values():
        if other != own and metric.get(other) is not None:
            causes.append(v.forbidden(v.child(here, other), "must populate the given metric source only"))
    source_field = v.child(here, own)
    if metric.get(own) is None:
        causes.append(v.required(source_field, "must populate information for the given metric source"))
        return
    source = v.as_dict(metric.get(own), source_field, causes)
    if kind in ("Resource", "ContainerResource") and not source.get("name"):
        causes.append(v.required(v.child(source_field, "name"), "must specify a resource name"))
    if kind == "ContainerResource" and not source.get("container"):
        causes.append(v.required(v.child(source_field, "container"), "must specify a container"))
    if kind in ("Pods", "Object", "External"):
        if not get(source, "metric.name"):
            causes.append(v.required(v.child(source_field, "metric.name"), "must specify a metric name"))
    if kind == "Object":
        ref = v.as_dict(source.get("describedObject"), v.child(source_field, "describedObject"), causes)
        for part in ("kind", "name"):
            if not ref.get(part):
                causes.append(v.required(v.child(source_field, f"describedObject.{part}")))
    _validate_target(source.get("target"), v.child(source_field, "target"), causes)


def _validate_behavior(behavior: Obj, causes: list[Cause]) -> None:
    for direction in ("scaleUp", "scaleDown"):
        field = f"spec.behavior.{direction}"
        rules = v.as_dict(behavior.get(direction), field, causes)
        window = rules.get("stabilizationWindowSeconds")
        if window is not None and (not v.is_int(window) or not 0 <= window <= 3600):
            causes.append(
                v.invalid(v.child(field, "stabilizationWindowSeconds"), window, "must be less than or equal to 3600")
            )
        causes += v.validate_enum(rules.get("selectPolicy"), v.child(field, "selectPolicy"), SELECT_POLICIES)
        for i, policy in enumerate(v.as_list(rules.get("policies"), v.child(field, "policies"), causes)):
            here = v.index(v.child(field, "policies"), i)
            policy = v.as_dict(policy, here, causes)
            causes += v.validate_enum(policy.get("type"), v.child(here, "type"), POLICY_TYPES, optional=False)
            causes += v.validate_positive(policy.get("value"), v.child(here, "value"))
            period = policy.get("periodSeconds")
            if not v.is_int(period) or not 0 < period <= 1800:
                causes.append(
                    v.invalid(
                        v.child(here, "periodSeconds"),
                        period,
                        "must be greater than zero and less than or equal to 1800",
                    )
                )


def validate_v2(hpa: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(hpa, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(hpa.get("spec"), "spec", causes)
    ref = v.as_dict(spec.get("scaleTargetRef"), "spec.scaleTargetRef", causes)
    for part in ("kind", "name"):
        value = ref.get(part)
        field = f"spec.scaleTargetRef.{part}"
        if not value:
            causes.append(v.required(field))
        elif isinstance(value, str):
            causes += [v.invalid(field, value, m) for m in v.name_is_path_segment(value, False)]
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    if low is not None and (not v.is_int(low) or low < 1):
        causes.append(v.invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    if not v.is_int(high) or high < 1:
        causes.append(v.invalid("spec.maxReplicas", high, "must be greater than 0"))
    elif v.is_int(low) and high < low:
        causes.append(v.invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    for i, metric in enumerate(v.as_list(spec.get("metrics"), "spec.metrics", causes)):
        here = v.index("spec.metrics", i)
        _validate_metric(v.as_dict(metric, here, causes), here, causes)
    if spec.get("behavior") is not None:
        _validate_behavior(v.as_dict(spec.get("behavior"), "spec.behavior", causes), causes)
    return causes


def validate_v1(hpa: Obj, old: Obj | None) -> list[Cause]:
    return validate_v2(v1_to_v2(hpa), None if old is None else v1_to_v2(old))


# -- table --------------------------------------------------------------------------------------


def _quantity(value: Any) -> str:
    return str(value) if value is not None else "<unknown>"


def _target_text(spec: Obj, status: Obj | None, source: str) -> str:
    target = mapping(spec, f"{source}.target")
    current = mapping(status, f"{source}.current") if status is not None else {}
    if source in ("resource", "containerResource"):
        name = text(spec, f"{source}.name")
        if target.get("averageValue") is not None:
            now = _quantity(current.get("averageValue"))
            return f"{name}: {now}/{target['averageValue']}"
        util = current.get("averageUtilization")
        now = f"{util}%" if util is not None else "<unknown>"
        goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
        return f"{name}: {now}/{goal}"
    if source == "pods":
        return f"{_quantity(current.get('averageValue'))}/{target.get('averageValue')}"
    if target.get("averageValue") is not None:
        return f"{_quantity(current.get('averageValue'))}/{target['averageValue']} (avg)"
    return f"{_quantity(current.get('value'))}/{target.get('value')}"


def targets_text(hpa: Obj) -> str:
    """formatHPAMetrics: `cpu: 40%/80%`, at most two, then `+ N more...`."""
    specs = dicts(hpa, "spec.metrics")
    if not specs:
        return "<none>"
    statuses = dicts(hpa, "status.currentMetrics")
    shown = []
    for i, metric in enumerate(specs):
        source = _SOURCE_FIELD.get(text(metric, "type"))
        if source is None:
            shown.append("<unknown type>")
            continue
        status = statuses[i] if i < len(statuses) and isinstance(statuses[i].get(source), dict) else None
        shown.append(_target_text(metric, status, source))
    if len(shown) > 2:
        return ", ".join(shown[:2]) + f" + {len(shown) - 2} more..."
    return ", ".join(shown)


def row_v2(hpa: Obj, now: float) -> list[Any]:
    ref = mapping(hpa, "spec.scaleTargetRef")
    low = get(hpa, "spec.minReplicas")
    return [
        f"{text(ref, 'kind')}/{text(ref, 'name')}",
        targets_text(hpa),
        str(low) if v.is_int(low) else "<unset>",
        number(hpa, "spec.maxReplicas"),
        number(hpa, "status.currentReplicas"),
    ]


def row_v1(hpa: Obj, now: float) -> list[Any]:
    return row_v2(from_storage_v2(v1_to_v2(hpa)), now)


COLUMNS = (
    Column("Reference", description="scaleTargetRef points to the target resource to scale."),
    Column(
        "Targets",
        description="metrics contains the specifications for which to use to calculate the desired replica count.",
    ),
    Column(
        "MinPods",
        description="minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
    ),
    Column(
        "MaxPods",
        description="maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
    ),
    Column("Replicas", description="currentReplicas is current number of replicas of pods managed by this autoscaler."),
)

V2 = ResourceDef(
    group="autoscaling",
    version="v2",
    kind="HorizontalPodAutoscaler",
    plural="horizontalpodautoscalers",
    singular="horizontalpodautoscaler",
    namespaced=True,
    # currentMetrics is not omitempty either: kube writes null, which reads as absent
    empty_status={"desiredReplicas": 0},
    short_names=("hpa",),
    categories=("all",),
    subresources=(Subresource("status", "HorizontalPodAutoscaler", handler=STATUS_VIEW),),
    default=default_v2,
    validate=validate_v2,
    columns=COLUMNS,
    row=row_v2,
    from_storage=from_storage_v2,
)
V1 = ResourceDef(
    group="autoscaling",
    version="v1",
    kind="HorizontalPodAutoscaler",
    plural="horizontalpodautoscalers",
    singular="horizontalpodautoscaler",
    namespaced=True,
    empty_status={"currentReplicas": 0, "desiredReplicas": 0},
    short_names=("hpa",),
    categories=("all",),
    subresources=(Subresource("status", "HorizontalPodAutoscaler", handler=STATUS_VIEW),),
    default=default_v1,
    validate=validate_v1,
    columns=COLUMNS,
    row=row_v1,
    store_as="horizontalpodautoscalers",
    to_storage=v1_to_v2,
    from_storage=v2_to_v1,
)
RESOURCES = (V2, V1)
