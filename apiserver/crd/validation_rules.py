"""A CRD schema's CEL rules (`x-kubernetes-validations`), compiled once and run on each write.

Each rule is evaluated with `self` the value at its place in the schema; a rule that names
`oldSelf` is a transition rule, run on updates only, and only where the old object has a
value at the same place (correlated through properties and map keys; kube correlates list
items of map-type lists too, which is not done yet: such rules do not run inside lists).  A
rule that is false yields kube's cause: `<path>: Invalid value: "<type>": <message>` (or
`failed rule: <rule>` without a message), its reason and `fieldPath` as the rule says.

Compiling happens when the CRD is stored (`rule_problems`, so a rule that does not compile
refuses the CRD with the compiler's words) and when its kinds are built (`Rules.of`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver import validation as v
from apiserver.admission.cel import RULES, CompileError, EvalError, Program
from apiserver.errors import Cause

Schema = Mapping[str, Any]
MAX_DEPTH = 64
MAX_RULES = 1000
_REASONS = ("FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate")


@dataclass(frozen=True)
class _Rule:
    program: Program
    source: str
    message: str
    reason: str
    field_path: str
    transition: bool


def _rules_at(schema: Schema) -> list[Any]:
    found = schema.get("x-kubernetes-validations")
    return found if isinstance(found, list) else []


def _walk(schema: Schema, path: str, depth: int = 0) -> Iterator[tuple[str, Schema]]:
    """Every schema node with its path in the CRD (`properties[spec].items`)."""
    if depth > MAX_DEPTH:
        return
    yield path, schema
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for name, sub in props.items():
            if isinstance(sub, Mapping):
                yield from _walk(sub, f"{path}.properties[{name}]", depth + 1)
    for member in ("items", "additionalProperties"):
        sub = schema.get(member)
        if isinstance(sub, Mapping):
            yield from _walk(sub, f"{path}.{member}", depth + 1)


def _compile(raw: Any) -> _Rule | str:
    """A rule, or why it cannot be one."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("rule"), str):
        return "rule: Required value"
    source = raw["rule"]
    try:
        program = RULES.compile(source, "bool")
    except CompileError as e:
        return f"compilation failed: {e}"
    reason = raw.get("reason") or "FieldValueInvalid"
    if reason not in _REASONS:
        return f"reason: Unsupported value: {reason!r}"
    return _Rule(
        program,
        source,
        str(raw.get("message") or ""),
        str(reason),
        str(raw.get("fieldPath") or ""),
        "oldSelf" in source,
    )


def rule_problems(schema: Schema, path: str) -> list[Cause]:
    """Rules of the schema that do not compile (or say too little), as CRD validation names them."""
    causes: list[Cause] = []
    count = 0
    for at, node in _walk(schema, path):
        for i, raw in enumerate(_rules_at(node)):
            count += 1
            if count > MAX_RULES:
                return [*causes, v.forbidden(path, f"must not hold more than {MAX_RULES} validation rules")]
            compiled = _compile(raw)
            if isinstance(compiled, str):
                field = f"{at}.x-kubernetes-validations[{i}].rule"
                causes.append(v.invalid(field, raw.get("rule") if isinstance(raw, Mapping) else raw, compiled))
    return causes


@dataclass(frozen=True)
class _Node:
    rules: tuple[_Rule, ...]
    type: str
    properties: Mapping[str, _Node]
    items: _Node | None
    values: _Node | None


def _build(schema: Schema, depth: int = 0) -> _Node | None:
    """The schema's rule-carrying skeleton; None where nothing below has a rule."""
    if depth > MAX_DEPTH:
        return None
    rules = tuple(r for r in (_compile(raw) for raw in _rules_at(schema)) if isinstance(r, _Rule))
    props: dict[str, _Node] = {}
    found = schema.get("properties")
    if isinstance(found, Mapping):
        for name, sub in found.items():
            built = _build(sub, depth + 1) if isinstance(sub, Mapping) else None
            if built is not None:
                props[name] = built
    items = _build(schema["items"], depth + 1) if isinstance(schema.get("items"), Mapping) else None
    extra = schema.get("additionalProperties")
    values = _build(extra, depth + 1) if isinstance(extra, Mapping) else None
    if not rules and not props and items is None and values is None:
        return None
    kind = schema.get("type") if isinstance(schema.get("type"), str) else "object"
    return _Node(rules, str(kind), props, items, values)


_ABSENT = object()


class Rules:
    """One version's compiled rules."""

    def __init__(self, root: _Node | None) -> None:
        self.root = root

    @classmethod
    def of(cls, schema: Schema) -> Rules:
        return cls(_build(schema))

    def validate(self, obj: Any, old: Any | None) -> list[Cause]:
        if self.root is None:
            return []
        causes: list[Cause] = []
        self._check(self.root, obj, old if old is not None else _ABSENT, "", causes, 0)
        return causes

    def _check(self, node: _Node, value: Any, old: Any, path: str, causes: list[Cause], depth: int) -> None:
        if value is None or depth > MAX_DEPTH or len(causes) >= MAX_RULES:
            return
        for rule in node.rules:
            if rule.transition and old is _ABSENT:
                continue
            bound = {"self": value, "oldSelf": None if old is _ABSENT else old}
            try:
                ok = rule.program.run(RULES.activation(bound))
            except EvalError as e:
                causes.append(v.invalid(path or "<nil>", node.type, f"{rule.source}: {e}"))
                continue
            if ok is not True:
                causes.append(self._cause(rule, node, path))
        if isinstance(value, dict):
            before = old if isinstance(old, dict) else {}
            for name, sub in node.properties.items():
                if name in value:
                    child = v.child(path, name)
                    self._check(sub, value[name], before.get(name, _ABSENT), child, causes, depth + 1)
            if node.values is not None:
                for key, sub_value in value.items():
                    child = v.child(path, key)
                    self._check(node.values, sub_value, before.get(key, _ABSENT), child, causes, depth + 1)
        elif isinstance(value, list) and node.items is not None:
            for i, item in enumerate(value):
                self._check(node.items, item, _ABSENT, v.index(path, i), causes, depth + 1)

    @staticmethod
    def _cause(rule: _Rule, node: _Node, path: str) -> Cause:
        """`fieldPath` (`.spec.x`, `['a.b']`) is relative to the rule's place."""
        relative = rule.field_path
        if relative.startswith("."):
            field = path + relative if path else relative[1:]
        elif relative:
            field = path + relative if relative.startswith("[") else v.child(path, relative)
        else:
            field = path
        message = rule.message or f"failed rule: {rule.source}"
        shown = field or "<nil>"
        if rule.reason == "FieldValueRequired":
            return v.required(shown, message)
        if rule.reason == "FieldValueForbidden":
            return v.forbidden(shown, message)
        if rule.reason == "FieldValueDuplicate":
            return Cause("FieldValueDuplicate", f"Duplicate value: {message}", shown)
        return v.invalid(shown, node.type, message)
