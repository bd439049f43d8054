"""admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy: CEL validations run in-process on
the requests its matchConstraints select (for the bindings that bind it).  The shape is checked
here, and every CEL expression must compile (kube's 422 `compilation failed: ...`, by the
admission code's own `compile_errors`, so the write and the chain use one CEL machinery)."""

from __future__ import annotations

import re
from typing import Any

from apiserver import validation as v
from apiserver.admission.policy.compiled import compile_errors
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import status_view
from apiserver.registry.strategy import OBJECT_META
from apiserver.resources import _admission
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, get, items, text

REASONS = ("Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized")
_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


def default(policy: Obj) -> None:
    spec = policy.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("failurePolicy", "Fail")
        _admission.default_match_resources(spec, "matchConstraints")


def _required_text(entry: Obj, key: str, field: str, causes: list[Cause], detail: str = "") -> None:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        causes.append(v.required(v.child(field, key), detail))


def _validate_validations(spec: Obj, causes: list[Cause]) -> None:
    field = "spec.validations"
    for i, rule in enumerate(v.as_list(spec.get("validations"), field, causes)):
        here = v.index(field, i)
        rule = v.as_dict(rule, here, causes)
        _required_text(rule, "expression", here, causes, "expression is not specified")
        message = rule.get("message")
        if isinstance(message, str) and message:
            if "\n" in message:
                causes.append(v.invalid(v.child(here, "message"), message, "message must not contain line breaks"))
            elif not message.strip():
                causes.append(v.invalid(v.child(here, "message"), message, "message must be non-empty if specified"))
        causes += v.validate_enum(rule.get("reason"), v.child(here, "reason"), REASONS)


def validate(policy: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(policy, namespaced=False, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(policy.get("spec"), "spec", causes)
    causes += v.validate_enum(spec.get("failurePolicy"), "spec.failurePolicy", _admission.FAILURE_POLICIES)
    if spec.get("paramKind") is not None:
        kind = v.as_dict(spec.get("paramKind"), "spec.paramKind", causes)
        for key in ("apiVersion", "kind"):
            _required_text(kind, key, "spec.paramKind", causes)
    match = spec.get("matchConstraints")
    if match is None:
        causes.append(v.required("spec.matchConstraints"))
    else:
        match_dict = v.as_dict(match, "spec.matchConstraints", causes)
        _admission.validate_match_resources(match_dict, "spec.matchConstraints", causes)
        if not match_dict.get("resourceRules"):
            causes.append(v.required("spec.matchConstraints.resourceRules"))
    if not items(spec, "validations") and not items(spec, "auditAnnotations"):
        causes.append(v.required("spec.validations", "validations or auditAnnotations must contain at least one item"))
    _validate_validations(spec, causes)
    for i, note in enumerate(v.as_list(spec.get("auditAnnotations"), "spec.auditAnnotations", causes)):
        here = v.index("spec.auditAnnotations", i)
        note = v.as_dict(note, here, causes)
        _required_text(note, "key", here, causes)
        _required_text(note, "valueExpression", here, causes, "valueExpression is not specified")
    for i, var in enumerate(v.as_list(spec.get("variables"), "spec.variables", causes)):
        here = v.index("spec.variables", i)
        var = v.as_dict(var, here, causes)
        name = var.get("name")
        if not isinstance(name, str) or not name:
            causes.append(v.required(v.child(here, "name")))
        elif not _IDENTIFIER.match(name):
            causes.append(v.invalid(v.child(here, "name"), name, "name is not a valid CEL identifier"))
        _required_text(var, "expression", here, causes)
    # kube leaves match conditions unchecked on an update that changes neither them nor paramKind
    old_spec = old.get("spec") if old is not None else None
    check_conditions = not isinstance(old_spec, dict) or any(
        spec.get(k) != old_spec.get(k) for k in ("matchConditions", "paramKind")
    )
    if check_conditions:
        _admission.validate_match_conditions(spec.get("matchConditions"), "spec.matchConditions", causes)
    named = {c.field for c in causes}
    causes += [
        c
        for c in compile_errors(policy)
        if c.field not in named and (check_conditions or not c.field.startswith("spec.matchConditions["))
    ]
    return causes


def row(policy: Obj, now: float) -> list[Any]:
    kind = get(policy, "spec.paramKind")
    shown = f"{text(kind, 'apiVersion')}/{text(kind, 'kind')}" if isinstance(kind, dict) else "<unset>"
    return [len(items(policy, "spec.validations")), shown]


RESOURCE = ResourceDef(
    group="admissionregistration.k8s.io",
    version="v1",
    kind="ValidatingAdmissionPolicy",
    plural="validatingadmissionpolicies",
    singular="validatingadmissionpolicy",
    namespaced=False,
    empty_status={},
    categories=_admission.CATEGORIES,
    subresources=(Subresource("status", "ValidatingAdmissionPolicy", handler=status_view(*OBJECT_META)),),
    default=default,
    validate=validate,
    columns=(
        Column(
            "Validations",
            type="integer",
            description="Validations indicates the number of validation rules defined in this configuration",
        ),
        Column("ParamKind", description="ParamKind specifies the kind of resources used to parameterize this policy"),
    ),
    row=row,
)
