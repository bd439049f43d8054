"""A ValidatingAdmissionPolicy compiled once (per generation of the object): its match
constraints parsed, its CEL expressions compiled, and what was wrong with it.

kube compiles at load too and reports an expression that does not compile when it runs
(`compilation error: ...`, then the failure policy decides); `compile_errors` gives the
same problems as field causes for the resource's write-time validation to refuse the object.
`auditAnnotations` are compiled (so their errors are refused at write time) but not
evaluated: this server keeps no audit log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from apiserver import validation
from apiserver.admission.cel import POLICY, CompileError, Want, compile_expression
from apiserver.admission.matchconditions import Expression, Named, compile_source
from apiserver.admission.policy.matching import MatchError, MatchResources
from apiserver.errors import Cause

REASONS = ("Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge")
FailurePolicy = Literal["Fail", "Ignore"]
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Validation:
    expression: Expression
    message: str = ""
    reason: str = ""  # "" -> Invalid
    message_expression: Expression | None = None


@dataclass(frozen=True, slots=True)
class ParamKind:
    api_version: str
    kind: str


@dataclass(frozen=True)
class CompiledPolicy:
    name: str
    failure_policy: FailurePolicy
    match: MatchResources | None  # None: unparseable (`config_error` says why), so it matches nothing
    param_kind: ParamKind | None
    match_conditions: tuple[Named, ...]
    variables: tuple[Named, ...]
    validations: tuple[Validation, ...]
    config_error: str = ""  # a spec this plugin cannot run: the failure policy decides


def _compile(source: Any, want: Want) -> Expression:
    return compile_source(POLICY, source, want)


def _items(spec: dict[str, Any], key: str) -> list[Any]:
    value = spec.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MatchError(f"spec.{key}", "must be a list")
    return value


def _entry(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MatchError(field, "must be an object")
    return value


def compile_policy(obj: dict[str, Any]) -> CompiledPolicy:
    """Never raises: a malformed policy compiles to one whose `config_error` says why."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = str((meta or {}).get("name", ""))
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    failure: FailurePolicy = "Ignore" if spec.get("failurePolicy") == "Ignore" else "Fail"
    try:
        match = MatchResources.parse(spec.get("matchConstraints"), "spec.matchConstraints")
    except MatchError as e:
        return CompiledPolicy(name, failure, None, None, (), (), (), config_error=str(e))
    try:
        return _compile_spec(name, failure, match, spec)
    except MatchError as e:
        return CompiledPolicy(name, failure, match, None, (), (), (), config_error=str(e))


def _compile_spec(name: str, failure: FailurePolicy, match: MatchResources, spec: dict[str, Any]) -> CompiledPolicy:
    if spec.get("failurePolicy") not in (None, "Fail", "Ignore"):
        raise MatchError("spec.failurePolicy", f"unsupported failure policy {spec.get('failurePolicy')!r}")
    param_kind = None
    if spec.get("paramKind") is not None:
        pk = _entry(spec["paramKind"], "spec.paramKind")
        api_version, kind = pk.get("apiVersion"), pk.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
            raise MatchError("spec.paramKind", "apiVersion and kind are required")
        param_kind = ParamKind(api_version, kind)
    conditions = []
    for i, c in enumerate(_items(spec, "matchConditions")):
        c = _entry(c, f"spec.matchConditions[{i}]")
        conditions.append(Named(str(c.get("name", "")), _compile(c.get("expression"), "bool")))
    variables = []
    for i, v in enumerate(_items(spec, "variables")):
        v = _entry(v, f"spec.variables[{i}]")
        variables.append(Named(str(v.get("name", "")), _compile(v.get("expression"), "any")))
    validations = []
    for i, v in enumerate(_items(spec, "validations")):
        v = _entry(v, f"spec.validations[{i}]")
        message_expression = None
        if v.get("messageExpression") is not None:
            message_expression = _compile(v["messageExpression"], "string")
        reason = v.get("reason") or ""
        validations.append(
            Validation(
                _compile(v.get("expression"), "bool"),
                str(v.get("message") or ""),
                reason if reason in REASONS else "",
                message_expression,
            )
        )
    return CompiledPolicy(name, failure, match, param_kind, tuple(conditions), tuple(variables), tuple(validations))


def compile_errors(obj: dict[str, Any]) -> list[Cause]:
    """The CEL expressions of a ValidatingAdmissionPolicy that do not compile, and match
    constraints that do not parse, as 422 causes with kube's field paths (for the resource's
    validation to refuse the write).  Other field checks are the resource module's."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    causes: list[Cause] = []
    try:
        MatchResources.parse(spec.get("matchConstraints"), "spec.matchConstraints")
    except MatchError as e:
        causes.append(validation.invalid(e.field, spec.get("matchConstraints"), e.message))

    def check(items_key: str, key: str, want: Want) -> None:
        items = spec.get(items_key)
        if not isinstance(items, list):
            return
        for i, item in enumerate(items):
            if not isinstance(item, dict) or item.get(key) is None:
                continue
            field = f"spec.{items_key}[{i}].{key}"
            source = item[key]
            if not isinstance(source, str):
                causes.append(validation.invalid(field, source, "must be a string"))
                continue
            try:
                compile_expression(source, want)
            except CompileError as e:
                causes.append(validation.invalid(field, source, f"compilation failed: {e}"))

    check("validations", "expression", "bool")
    check("validations", "messageExpression", "string")
    check("matchConditions", "expression", "bool")
    check("variables", "expression", "any")
    check("auditAnnotations", "valueExpression", "any")
    variables = spec.get("variables")
    for i, v in enumerate(variables if isinstance(variables, list) else []):
        name = v.get("name") if isinstance(v, dict) else None
        if isinstance(name, str) and not _IDENTIFIER.fullmatch(name):
            causes.append(validation.invalid(f"spec.variables[{i}].name", name, "name is not a valid CEL identifier"))
    return causes
