"""A ValidatingAdmissionPolicyBinding, parsed once: which policy, with which params, over
which resources (narrowing the policy's), and what a failed validation does
(`validationActions`: Deny refuses the write, Warn sends the client a warning, Audit would
annotate the audit event; this server keeps no audit log, so Audit does nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apiserver.admission.policy.matching import MatchError, MatchResources, parse_selector

ACTIONS = ("Deny", "Warn", "Audit")


@dataclass(frozen=True, slots=True)
class ParamRef:
    name: str = ""
    namespace: str = ""
    selector: Any = None  # a LabelSelector when selecting by labels
    deny_when_missing: bool = False  # parameterNotFoundAction: Deny


@dataclass(frozen=True)
class CompiledBinding:
    name: str
    policy_name: str
    param_ref: ParamRef | None
    match: MatchResources | None  # None: the policy's own constraints only
    actions: tuple[str, ...]
    config_error: str = ""


def compile_binding(obj: dict[str, Any]) -> CompiledBinding:
    """Never raises: a malformed binding carries a `config_error` (the policy's failure
    policy decides what that means for a write it covers)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else None
    name = str((meta or {}).get("name", ""))
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    policy_name = spec.get("policyName")
    policy_name = policy_name if isinstance(policy_name, str) else ""
    raw_actions = spec.get("validationActions")
    actions = tuple(a for a in raw_actions if a in ACTIONS) if isinstance(raw_actions, list) else ()
    try:
        match = None
        if spec.get("matchResources") is not None:
            match = MatchResources.parse(spec["matchResources"], "spec.matchResources")
        return CompiledBinding(name, policy_name, _param_ref(spec.get("paramRef")), match, actions)
    except MatchError as e:
        return CompiledBinding(name, policy_name, None, None, actions, config_error=str(e))


def _param_ref(value: Any) -> ParamRef | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MatchError("spec.paramRef", "must be an object")
    name, namespace = value.get("name") or "", value.get("namespace") or ""
    if not isinstance(name, str) or not isinstance(namespace, str):
        raise MatchError("spec.paramRef", "name and namespace must be strings")
    selector = None
    if value.get("selector") is not None:
        if name:
            raise MatchError("spec.paramRef", "name and selector are mutually exclusive")
        selector = parse_selector(value["selector"], "spec.paramRef.selector")
    elif not name:
        raise MatchError("spec.paramRef", "one of name or selector must be provided")
    return ParamRef(name, namespace, selector, value.get("parameterNotFoundAction") == "Deny")
