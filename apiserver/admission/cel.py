"""CEL for admission, through cel-expr-python (the CEL team's binding of cel-cpp): the one
module that imports the library, shared by ValidatingAdmissionPolicy and the webhooks'
matchConditions.

The rest sees an `Environment` (`compile`, `activation`), `Program`, `Activation` and two
errors.  An environment declares the variables kube gives an expression, all dynamically typed
(kube types them from OpenAPI schemas; here a wrong field is a runtime error, not a compile
error), with the strings and optional-value extensions kube enables.  `POLICY` has a
ValidatingAdmissionPolicy's (`object`, `oldObject`, `request`, `params`, `namespaceObject`,
`variables`); `WEBHOOK` a webhook match condition's (`object`, `oldObject`, `request`).
`RULES` a CustomResourceDefinition's validation rule's (`self`, `oldSelf`).
`authorizer` is declared in none (its function library is not implemented), so an
expression using it fails to compile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cel_expr_python import cel
from cel_expr_python.ext import ext_optional, ext_strings

MAX_EXPRESSION_LENGTH = 5 * 1024  # kube's limit on a stored expression, in bytes

Want = Literal["bool", "string", "any"]

_WANT_TYPE = {"bool": cel.Type.BOOL, "string": cel.Type.STRING}


class CompileError(Exception):
    """The expression does not parse or type-check; the message is CEL's, as kube shows it."""


class EvalError(Exception):
    """The expression failed at run time (no such key, overflow, division by zero, ...)."""


def _clean(message: str) -> str:
    """cel-cpp wraps messages in an absl status (`INVALID_ARGUMENT: ... [INVALID_ARGUMENT]`)
    where cel-go, which kube uses, does not; strip it, and say a missing key as cel-go does."""
    text = message.strip()
    for code in ("INVALID_ARGUMENT", "NOT_FOUND", "UNKNOWN", "OUT_OF_RANGE", "FAILED_PRECONDITION", "INTERNAL"):
        if text.startswith(code + ": "):
            text = text[len(code) + 2 :]
        if text.endswith(f" [{code}]"):
            text = text[: -len(code) - 3]
    prefix = "Key not found in map : "
    if text.startswith(prefix):
        text = "no such key: " + text[len(prefix) :].strip('"')
    return text


@dataclass(frozen=True)
class Activation:
    """The variables of one evaluation, converted to CEL values once and shared by every
    expression of a policy (the conversion is most of an evaluation's cost)."""

    _native: Any

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Activation:
        """The policy environment's activation (see `Environment.activation`)."""
        return POLICY.activation(values)


@dataclass(frozen=True)
class Program:
    """A compiled expression; `run` gives a plain Python value or raises EvalError."""

    source: str
    _expr: Any

    def run(self, activation: Activation) -> Any:
        try:
            value = self._expr.eval(activation._native)
            if value.type() == cel.Type.ERROR:
                raise EvalError(_clean(str(value.value())))
            return value.plain_value()
        except EvalError:
            raise
        except Exception as e:  # conversion of odd values, unknowns: all are run-time errors
            raise EvalError(_clean(str(e))) from None


class Environment:
    """The CEL environment over one set of variables (built once: building one is costly)."""

    def __init__(self, variables: tuple[str, ...]) -> None:
        self.variables = variables
        self._env = cel.NewEnv(
            variables={name: cel.Type.DYN for name in variables},
            extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional()],
        )

    def activation(self, values: Mapping[str, Any]) -> Activation:
        """Every declared variable gets a value (None when absent), as kube binds them all.
        EvalError when a value cannot become CEL (not JSON-like)."""
        data = {name: values.get(name) for name in self.variables}
        try:
            return Activation(self._env.Activation(data=data))
        except Exception as e:  # the binding raises RuntimeError/TypeError on odd values
            raise EvalError(_clean(str(e))) from None

    def compile(self, source: str, want: Want = "any") -> Program:
        """Parse and type-check `source`; `want` is the type the result must be able to have
        (a dynamically typed result passes and is checked when it runs)."""
        if not isinstance(source, str):
            raise CompileError("expression must be a string")
        if len(source.encode()) > MAX_EXPRESSION_LENGTH:
            raise CompileError(f"expression is longer than {MAX_EXPRESSION_LENGTH} bytes")
        try:
            expr = self._env.compile(source)
        except Exception as e:
            raise CompileError(_clean(str(e))) from None
        wanted = _WANT_TYPE.get(want)
        if wanted is not None:
            got = expr.return_type()
            if got != wanted and got != cel.Type.DYN:
                raise CompileError(f"must evaluate to {want}, not {got.name().lower()}")
        return Program(source, expr)


POLICY = Environment(("object", "oldObject", "request", "params", "namespaceObject", "variables"))
WEBHOOK = Environment(("object", "oldObject", "request"))
# a CRD schema's x-kubernetes-validations: the value at the rule's place, and its old value
RULES = Environment(("self", "oldSelf"))


def compile_expression(source: str, want: Want = "any") -> Program:
    """`source` compiled in the policy environment."""
    return POLICY.compile(source, want)
