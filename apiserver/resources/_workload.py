"""What controllers of pods share (deployments, replicasets, jobs): a selector that picks the
pods their template stamps out, fixed once the object exists."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from machinery.objects import Obj, get, mapping
from machinery.selectors import label_selector_matches

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _validate_selector_shape(selector: Obj, field: str) -> list[Cause]:
    causes = v.validate_labels(selector.get("matchLabels"), v.child(field, "matchLabels"))
    exprs_field = v.child(field, "matchExpressions")
    for i, expr in enumerate(v.as_list(selector.get("matchExpressions"), exprs_field, causes)):
        here = v.index(exprs_field, i)
        expr = v.as_dict(expr, here, causes)
        op = expr.get("operator")
        causes += v.validate_enum(op, v.child(here, "operator"), _OPERATORS, optional=False)
        values = v.as_list(expr.get("values"), v.child(here, "values"), causes)
        if op in ("In", "NotIn") and not values:
            causes.append(v.required(v.child(here, "values"), "must be specified when `operator` is 'In' or 'NotIn'"))
        if op in ("Exists", "DoesNotExist") and values:
            causes.append(
                v.forbidden(
                    v.child(here, "values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
            )
        expr_key = expr.get("key")
        if not isinstance(expr_key, str) or not expr_key:
            causes.append(v.required(v.child(here, "key")))
        else:
            causes += [v.invalid(v.child(here, "key"), expr_key, m) for m in v.is_qualified_name(expr_key)]
    return causes


def validate_selector(obj: Obj, old: Obj | None, what: str) -> list[Cause]:
    """`spec.selector` required, non-empty, well formed, selecting the template's labels, immutable.
    `what` names the kind in kube's message (`empty selector is invalid for deployment`)."""
    causes: list[Cause] = []
    spec = mapping(obj, "spec")
    raw = spec.get("selector")
    if raw is None:
        return [v.required("spec.selector")]
    selector = v.as_dict(raw, "spec.selector", causes)
    if causes:
        return causes
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        causes.append(v.invalid("spec.selector", selector, f"empty selector is invalid for {what}"))
    causes += _validate_selector_shape(selector, "spec.selector")
    labels = get(obj, "spec.template.metadata.labels")
    if not causes and isinstance(get(obj, "spec.template"), dict):
        label_map: dict[str, Any] = labels if isinstance(labels, dict) else {}
        if not label_selector_matches(selector, label_map):
            causes.append(
                v.invalid("spec.template.metadata.labels", label_map, "`selector` does not match template `labels`")
            )
    causes += v.validate_immutable(obj, old, "spec.selector")
    return causes


def validate_label_selector(selector: Any, field: str) -> list[Cause]:
    """A metav1.LabelSelector's shape alone (PDBs, quota scope selectors): an empty one is allowed."""
    causes: list[Cause] = []
    shape = v.as_dict(selector, field, causes)
    return causes or _validate_selector_shape(shape, field)
