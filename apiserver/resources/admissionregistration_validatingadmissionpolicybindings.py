"""admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding: puts a ValidatingAdmissionPolicy
in force, for the resources it matches, with a parameter object and the actions a failure takes."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources import _admission
from apiserver.resources._shared import selector_string
from apiserver.resources._workload import validate_label_selector
from apiserver.resources.base import Column, ResourceDef
from machinery.objects import Obj, get, text

ACTIONS = ("Audit", "Deny", "Warn")
NOT_FOUND_ACTIONS = ("Allow", "Deny")


def default(binding: Obj) -> None:
    spec = binding.get("spec")
    if not isinstance(spec, dict):
        return
    _admission.default_match_resources(spec, "matchResources")
    ref = spec.get("paramRef")
    if isinstance(ref, dict):
        ref.setdefault("parameterNotFoundAction", "Deny")


def _validate_param_ref(ref: Obj, causes: list[Cause]) -> None:
    field = "spec.paramRef"
    name, selector = ref.get("name"), ref.get("selector")
    if name and selector is not None:
        causes.append(v.forbidden(v.child(field, "name"), "name and selector are mutually exclusive"))
    elif not name and selector is None:
        causes.append(v.required(field, "one of name or selector must be specified"))
    if isinstance(name, str) and name:
        causes += [v.invalid(v.child(field, "name"), name, m) for m in v.name_is_path_segment(name, False)]
    if selector is not None:
        causes += validate_label_selector(selector, v.child(field, "selector"))
    namespace = ref.get("namespace")
    if isinstance(namespace, str) and namespace:
        causes += [v.invalid(v.child(field, "namespace"), namespace, m) for m in v.is_dns1123_label(namespace)]
    action = ref.get("parameterNotFoundAction")
    causes += v.validate_enum(action, v.child(field, "parameterNotFoundAction"), NOT_FOUND_ACTIONS, optional=False)


def _validate_actions(spec: Obj, causes: list[Cause]) -> None:
    field = "spec.validationActions"
    actions = v.as_list(spec.get("validationActions"), field, causes)
    if not actions:
        causes.append(v.required(field))
    seen: set[str] = set()
    for i, action in enumerate(actions):
        here = v.index(field, i)
        if action in seen:
            causes.append(v.duplicate(here, action))
        elif action not in ACTIONS:
            causes.append(v.not_supported(here, action, ACTIONS))
        if isinstance(action, str):
            seen.add(action)
    if {"Deny", "Warn"} <= seen:
        causes.append(
            v.invalid(
                field,
                actions,
                "must not contain both Deny and Warn (repeating the same validation failure information in the API "
                "response and headers serves no purpose)",
            )
        )


def validate(binding: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(binding, namespaced=False, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(binding.get("spec"), "spec", causes)
    policy = spec.get("policyName")
    if not policy:
        causes.append(v.required("spec.policyName"))
    elif isinstance(policy, str):
        causes += [v.invalid("spec.policyName", policy, m) for m in v.is_dns1123_subdomain(policy)]
    if spec.get("paramRef") is not None:
        _validate_param_ref(v.as_dict(spec.get("paramRef"), "spec.paramRef", causes), causes)
    if spec.get("matchResources") is not None:
        match = v.as_dict(spec.get("matchResources"), "spec.matchResources", causes)
        _admission.validate_match_resources(match, "spec.matchResources", causes)
    _validate_actions(spec, causes)
    return causes


def param_text(binding: Obj) -> str:
    """`namespace/name`, `*/name` (the namespace is the request's), a selector, or <unset>."""
    ref = get(binding, "spec.paramRef")
    if not isinstance(ref, dict):
        return "<unset>"
    name = text(ref, "name")
    if name:
        return f"{text(ref, 'namespace')}/{name}" if text(ref, "namespace") else f"*/{name}"
    if ref.get("selector") is not None:
        return selector_string(ref.get("selector"))
    return "<unset>"


def row(binding: Obj, now: float) -> list[Any]:
    return [text(binding, "spec.policyName"), param_text(binding)]


RESOURCE = ResourceDef(
    group="admissionregistration.k8s.io",
    version="v1",
    kind="ValidatingAdmissionPolicyBinding",
    plural="validatingadmissionpolicybindings",
    singular="validatingadmissionpolicybinding",
    namespaced=False,
    categories=_admission.CATEGORIES,
    default=default,
    validate=validate,
    columns=(
        Column(
            "PolicyName", description="PolicyName indicates the policy definition which the policy binding binded to"
        ),
        Column("ParamRef", description="ParamRef indicates the param resource which sets the configration param"),
    ),
    row=row,
)
