"""matchConditions, shared by ValidatingAdmissionPolicy and the admission webhooks (kube's
k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions, which both use).

A condition is compiled once (per generation of its object); one that does not compile is kept
with its error, which is an evaluation error when it runs (kube compiles at load the same way;
write-time validation refuses most such objects before they are stored).

`match` evaluates every condition: any `false` means no match (even when others erred); else
any error is the failure policy's to decide, with every error in kube's words
(`expression '<e>' resulted in error: <why>`), several as one `[a, b]` aggregate.  A result
that is neither `false` nor an error (even a non-bool under dynamic typing) does not exclude,
as in kube, which only looks for `false`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apiserver.admission.cel import Activation, CompileError, Environment, EvalError, Program, Want

MAX_CONDITIONS = 64  # kube's limit on matchConditions of one webhook or policy


@dataclass(frozen=True, slots=True)
class Expression:
    """A compiled expression, or why it did not compile (an error when evaluated)."""

    source: str
    program: Program | None
    error: str = ""

    def run(self, activation: Activation) -> Any:
        if self.program is None:
            raise EvalError(f"compilation error: {self.error}")
        return self.program.run(activation)


@dataclass(frozen=True, slots=True)
class Named:
    """A variable or a match condition: a name and a compiled expression."""

    name: str
    expression: Expression


def compile_source(environment: Environment, source: Any, want: Want) -> Expression:
    """Never raises: what does not compile is an Expression carrying its error."""
    if not isinstance(source, str) or not source.strip():
        return Expression(str(source or ""), None, "expression must be a non-empty string")
    try:
        return Expression(source, environment.compile(source, want))
    except CompileError as e:
        return Expression(source, None, str(e))


def compile_conditions(environment: Environment, raw: Any) -> tuple[Named, ...]:
    """A stored matchConditions list compiled; entries that are not objects are left out
    (write-time validation refuses them)."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        Named(str(c.get("name", "")), compile_source(environment, c.get("expression"), "bool"))
        for c in raw
        if isinstance(c, dict)
    )


@dataclass(frozen=True, slots=True)
class MatchResult:
    matches: bool
    error: str = ""  # set (and matches False): conditions erred and none was false
    failed_condition: str = ""  # the condition that was false


def match(conditions: Sequence[Named], activation: Activation) -> MatchResult:
    errors: list[str] = []
    for cond in conditions:
        try:
            value = cond.expression.run(activation)
        except EvalError as e:
            errors.append(f"expression '{cond.expression.source}' resulted in error: {e}")
            continue
        if value is False:
            return MatchResult(False, failed_condition=cond.name)
    if errors:
        return MatchResult(False, errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return MatchResult(True)


def compile_failures(environment: Environment, raw: Any) -> list[tuple[int, str, str]]:
    """(index, expression, kube's message) of each condition whose expression is a string that
    does not compile, for write-time validation (a missing expression is the caller's
    `Required`)."""
    out = []
    for i, c in enumerate(raw if isinstance(raw, list) else []):
        source = c.get("expression") if isinstance(c, dict) else None
        if not isinstance(source, str) or not source.strip():
            continue
        try:
            environment.compile(source, "bool")
        except CompileError as e:
            out.append((i, source, f"compilation failed: {e}"))
    return out
