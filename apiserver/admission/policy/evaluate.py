"""One policy evaluated for one write (and one param): the failed validations.

As kube's validator: match conditions first (`matchconditions.match`: any false, the policy
does not apply; an error and no false, an error), then each validation.  A validation fails unless its expression
gives exactly `true`; its message is the messageExpression's string (trimmed, one line, at
most 5 KiB), else `message`, else `failed expression: <expression>`, and its reason is
`reason` (Invalid when unset).  An expression that errs (or did not compile) is a failure
with `expression '<e>' resulted in error: <why>` under failurePolicy Fail, and nothing under
Ignore.  Variables are evaluated in order before the validations (each sees the earlier
ones); one that errs is left out, so an expression using it errs in turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.admission.cel import Activation, EvalError
from apiserver.admission.matchconditions import match
from apiserver.admission.policy.compiled import CompiledPolicy, Validation

MAX_MESSAGE_BYTES = 5 * 1024


@dataclass(frozen=True, slots=True)
class Decision:
    """A failed validation: the binding's validationActions say what it does."""

    message: str
    reason: str = "Invalid"
    error: bool = False  # an evaluation error (under failurePolicy Fail), not a false result


def _error(policy: CompiledPolicy, message: str) -> list[Decision]:
    return [Decision(message, error=True)] if policy.failure_policy == "Fail" else []


def evaluate(policy: CompiledPolicy, values: Mapping[str, Any], base: Activation | None = None) -> list[Decision]:
    """The failures of `policy` for the variables in `values` (object, oldObject, request,
    params, namespaceObject).  `base` is `Activation.of(values)` when the caller shares one
    between policies.  Never raises: every error is the failure policy's outcome."""
    try:
        activation = base if base is not None else Activation.of(values)
        if policy.variables:
            activation = _with_variables(policy, values)
    except EvalError as e:
        return _error(policy, f"the request cannot be evaluated: {e}")
    matched = match(policy.match_conditions, activation)
    if matched.error:
        return _error(policy, matched.error)
    if not matched.matches:
        return []
    decisions: list[Decision] = []
    for validation in policy.validations:
        try:
            passed = validation.expression.run(activation) is True
        except EvalError as e:
            decisions += _error(policy, f"expression '{validation.expression.source}' resulted in error: {e}")
            continue
        if not passed:
            decisions.append(Decision(_message(validation, activation), validation.reason or "Invalid"))
    return decisions


def _with_variables(policy: CompiledPolicy, values: Mapping[str, Any]) -> Activation:
    known: dict[str, Any] = {}
    for var in policy.variables:
        try:
            known[var.name] = var.expression.run(Activation.of({**values, "variables": known}))
        except EvalError:
            continue
    return Activation.of({**values, "variables": known})


def _message(validation: Validation, activation: Activation) -> str:
    if validation.message_expression is not None:
        try:
            text = validation.message_expression.run(activation)
        except EvalError:
            text = None
        if isinstance(text, str):
            text = text.strip()
            if text and "\n" not in text and len(text.encode()) <= MAX_MESSAGE_BYTES:
                return text
    if validation.message.strip():
        return validation.message.strip()
    return f"failed expression: {validation.expression.source.strip()}"
