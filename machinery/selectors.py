"""Label and field selectors, with the grammar and meaning Kubernetes gives them.

kubectl sends `?labelSelector=app=web,tier!=db` and `?fieldSelector=spec.nodeName=n1`; controllers
carry `metav1.LabelSelector` objects (`{matchLabels, matchExpressions}`).  Both end up here, as an
immutable selector that answers `matches(...)`.  Everything a client can type reaches `parse`, so a
bad selector raises `SelectorError` (the HTTP layer answers 400) and nothing else.

Label selectors (k8s.io/apimachinery/pkg/labels): requirements joined by commas, all must hold.
`k=v` and `k==v` need the label and the value; `k!=v` holds when the label is absent or differs;
`k in (a,b)` needs the label with one of the values; `k notin (a,b)` holds when absent or none of
them; `k` needs the label; `!k` needs it absent; `k>1`, `k<1` compare integers (as Kubernetes).
The canonical text (`str`) sorts requirements by key, writes `==` as `=` and sorts `in` values.

Field selectors (k8s.io/apimachinery/pkg/fields): `f=v`, `f==v`, `f!=v` joined by commas; `\\`
escapes `,`, `=` and itself in values.  Which fields exist is the resource's business: the caller
checks `field_names()` against what the resource supports.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class SelectorError(ValueError):
    """A selector that does not parse or validate; the message says which part is wrong."""


# --- validation of keys and values (k8s.io/apimachinery/pkg/util/validation) -----------------

_NAME_MAX = 63
_PREFIX_MAX = 253
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME_RULE = (
    "must be 63 characters or less, begin and end with an alphanumeric character "
    "and contain only alphanumerics, '-', '_' or '.'"
)


def key_problem(key: str) -> str | None:
    """Why `key` is not a valid label key (an optional DNS-subdomain prefix, '/', a name), or None."""
    if key.count("/") > 1:
        return f"key {key!r}: a qualified name has at most one '/' (prefix/name)"
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return f"key {key!r}: the prefix before '/' must be non-empty"
        if len(prefix) > _PREFIX_MAX or not _SUBDOMAIN.fullmatch(prefix):
            return (
                f"key {key!r}: the prefix {prefix!r} must be a lowercase DNS subdomain "
                f"(253 characters or less of a-z, 0-9, '-' and '.')"
            )
    if not name:
        return f"key {key!r}: the name part must be non-empty"
    if len(name) > _NAME_MAX or not _NAME.fullmatch(name):
        return f"key {key!r}: the name part {name!r} {_NAME_RULE}"
    return None


def value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value (may be empty), or None."""
    if value and (len(value) > _NAME_MAX or not _NAME.fullmatch(value)):
        return f"value {value!r} {_NAME_RULE} (or be empty)"
    return None


# --- label selectors ------------------------------------------------------------------------


class Op(StrEnum):
    """A requirement's operator, spelled as the canonical text writes it."""

    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = ">"
    LESS_THAN = "<"


_SET_OPS = (Op.IN, Op.NOT_IN)
_ONE_VALUE_OPS = (Op.EQUALS, Op.NOT_EQUALS, Op.GREATER_THAN, Op.LESS_THAN)


@dataclass(frozen=True, slots=True, order=True)
class Requirement:
    """One `key op values` term.  `values` is sorted and unique for in/notin, one value for
    =, !=, >, <, and empty for exists/!."""

    key: str
    op: Op
    values: tuple[str, ...] = ()

    @classmethod
    def make(cls, key: str, op: Op, values: tuple[str, ...] | list[str] = ()) -> Requirement:
        """Validate and normalise (Kubernetes' NewRequirement)."""
        problem = key_problem(key)
        if problem:
            raise SelectorError(problem)
        if op in _SET_OPS:
            if not values:
                raise SelectorError(f"key {key!r}: for 'in' and 'notin' the set of values must be non-empty")
            values = tuple(sorted(set(values)))
        elif op in _ONE_VALUE_OPS:
            if len(values) != 1:
                raise SelectorError(f"key {key!r}: operator {op.value!r} takes exactly one value")
        elif values:
            raise SelectorError(f"key {key!r}: 'exists' and 'does not exist' take no values")
        if op in (Op.GREATER_THAN, Op.LESS_THAN):
            if _as_int(values[0]) is None:
                raise SelectorError(f"key {key!r}: for '>' and '<' the value must be an integer, not {values[0]!r}")
        else:
            for value in values:
                problem = value_problem(value)
                if problem:
                    raise SelectorError(f"key {key!r}: {problem}")
        return cls(key, op, tuple(values))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return _holds(_KIND[self.op], labels.get(self.key), self.values)

    def __str__(self) -> str:
        if self.op is Op.EXISTS:
            return self.key
        if self.op is Op.DOES_NOT_EXIST:
            return f"!{self.key}"
        if self.op in _SET_OPS:
            # kube writes the set holding only "" as `()`, which its parser reads back as that set
            return f"{self.key} {self.op.value} ({','.join(self.values)})"
        return f"{self.key}{self.op.value}{self.values[0]}"


_KIND = {
    Op.EQUALS: "in",
    Op.IN: "in",
    Op.NOT_EQUALS: "notin",
    Op.NOT_IN: "notin",
    Op.EXISTS: "exists",
    Op.DOES_NOT_EXIST: "!",
    Op.GREATER_THAN: ">",
    Op.LESS_THAN: "<",
}


def _holds(kind: str, value: str | None, values: Sequence[str]) -> bool:
    """Whether the operator of this `kind` (`_KIND`) over `values` holds for a label whose value
    is `value` (None: no such label).  The one place an operator's meaning is written; every
    matcher here comes through it.  (Kinds are plain strings because the scheduler calls this
    per pod pair, and an Op costs a Python-level hash or attribute read each time.)"""
    if kind == "in":
        return value is not None and value in values
    if kind == "notin":
        return value is None or value not in values
    if kind == "exists":
        return value is not None
    if kind == "!":
        return value is None
    have = _as_int(value) if value is not None else None
    want = _as_int(values[0])
    if have is None or want is None:
        return False
    return have > want if kind == ">" else have < want


def _as_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64), which Kubernetes uses for > and <: an optional sign
    and ASCII digits only (Python's int() would also take blanks, '_' and other scripts' digits)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not (digits.isascii() and digits.isdigit()):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Requirements that must all hold.  No requirements selects everything; `matches_nothing`
    is the selector of an absent (nil) metav1.LabelSelector, which selects nothing."""

    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = False

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def nothing(cls) -> LabelSelector:
        return cls((), matches_nothing=True)

    @classmethod
    def of(cls, requirements: list[Requirement]) -> LabelSelector:
        return cls(tuple(sorted(requirements)))

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """The `?labelSelector=` text; "" (or only blanks) selects everything."""
        if not isinstance(text, str):
            raise SelectorError(f"a label selector must be a string, not {type(text).__name__}")
        return cls.of(_LabelParser(text).parse())

    @classmethod
    def from_dict(cls, sel: dict[str, Any] | None) -> LabelSelector:
        """A metav1.LabelSelector.  None selects nothing and `{}` selects everything, as
        Kubernetes' LabelSelectorAsSelector."""
        if sel is None:
            return cls.nothing()
        if not isinstance(sel, dict):
            raise SelectorError(f"a label selector must be an object, not {_json_type(sel)}")
        unknown = sorted(set(sel) - {"matchLabels", "matchExpressions"})
        if unknown:
            raise SelectorError(f"unknown field {unknown[0]!r} in label selector (matchLabels, matchExpressions)")
        reqs: list[Requirement] = []
        match_labels = sel.get("matchLabels")
        if match_labels is None:
            match_labels = {}
        if not isinstance(match_labels, dict):
            raise SelectorError(f"matchLabels must be an object, not {_json_type(match_labels)}")
        for key, value in match_labels.items():
            if not isinstance(value, str):
                raise SelectorError(f"matchLabels[{key!r}]: the value must be a string, not {_json_type(value)}")
            reqs.append(_prefixed(f"matchLabels[{key!r}]", key, Op.EQUALS, [value]))
        expressions = sel.get("matchExpressions")
        if expressions is None:
            expressions = []
        if not isinstance(expressions, list):
            raise SelectorError(f"matchExpressions must be a list, not {_json_type(expressions)}")
        for i, expr in enumerate(expressions):
            reqs.append(_expression(f"matchExpressions[{i}]", expr))
        return cls.of(reqs)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.matches_nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        """True when it selects everything (Kubernetes' Selector.Empty)."""
        return not self.requirements and not self.matches_nothing

    def __str__(self) -> str:
        # the nothing-selector has no text form; Kubernetes writes it as "" too
        return ",".join(str(r) for r in self.requirements)


_EXPR_OPS = {"In": Op.IN, "NotIn": Op.NOT_IN, "Exists": Op.EXISTS, "DoesNotExist": Op.DOES_NOT_EXIST}


def _expression(where: str, expr: object) -> Requirement:
    """One metav1.LabelSelectorRequirement {key, operator, values}."""
    if not isinstance(expr, dict):
        raise SelectorError(f"{where}: must be an object, not {_json_type(expr)}")
    unknown = sorted(set(expr) - {"key", "operator", "values"})
    if unknown:
        raise SelectorError(f"{where}: unknown field {unknown[0]!r} (key, operator, values)")
    key = expr.get("key")
    if not isinstance(key, str):
        raise SelectorError(f"{where}.key: required, a string")
    operator = expr.get("operator")
    if not isinstance(operator, str) or operator not in _EXPR_OPS:
        raise SelectorError(f"{where}.operator: {operator!r} is not a valid operator (In, NotIn, Exists, DoesNotExist)")
    values = expr.get("values")
    if values is None:
        values = []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SelectorError(f"{where}.values: must be a list of strings")
    op = _EXPR_OPS[operator]
    if op in _SET_OPS and not values:
        raise SelectorError(f"{where}.values: must be non-empty when operator is {operator}")
    if op not in _SET_OPS and values:
        raise SelectorError(f"{where}.values: must be empty when operator is {operator}")
    return _prefixed(where, key, op, values)


def _prefixed(where: str, key: str, op: Op, values: list[str]) -> Requirement:
    try:
        return Requirement.make(key, op, values)
    except SelectorError as e:
        raise SelectorError(f"{where}: {e}") from None


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


# --- stored selectors, matched as they are -------------------------------------------------
#
# Selectors inside stored objects (a ReplicaSet's, a PodDisruptionBudget's, a pod's affinity
# terms) were validated when written, and the scheduler and controllers match them against
# thousands of label sets a second, so these read the dict directly instead of building a
# LabelSelector.  They follow kube's conversions (LabelSelectorAsSelector,
# NodeSelectorRequirementsAsSelector): a requirement kube cannot convert (an unknown operator,
# In/NotIn without values, Exists/DoesNotExist with values, Gt/Lt without one integer) makes
# the whole selector select nothing, as kube's callers do with the conversion's error.

# metav1 operator -> kind (`_KIND`), for each place a stored requirement stands
_LABEL_KINDS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
_NODE_KINDS = {**_LABEL_KINDS, "Gt": ">", "Lt": "<"}
_FIELD_KINDS = {"In": "in", "NotIn": "notin"}


def _stored_kind(expr: object, kinds: Mapping[str, str]) -> str | None:
    """The kind of a stored {key, operator, values}, or None when kube refuses it.  (Written for
    speed: the scheduler asks this for every pod pair it spreads or affines.)"""
    if type(expr) is not dict and not isinstance(expr, Mapping):
        return None
    operator, values = expr.get("operator"), expr.get("values")
    if type(expr.get("key")) is not str or type(operator) is not str or operator not in kinds:
        return None
    if values is None:
        values = ()
    elif type(values) is not list:
        return None
    for value in values:
        if type(value) is not str:
            return None
    kind = kinds[operator]
    if kind == "in" or kind == "notin":
        return kind if values else None
    if kind == ">" or kind == "<":
        return kind if len(values) == 1 and _as_int(values[0]) is not None else None
    return None if values else kind


def _requirements_hold(exprs: list[Any], kinds: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    for expr in exprs:
        kind = _stored_kind(expr, kinds)
        if kind is None or not _holds(kind, labels.get(expr["key"]), expr.get("values") or ()):
            return False
    return True


def label_selector_matches(selector: object, labels: Mapping[str, str]) -> bool:
    """Whether a stored metav1.LabelSelector selects `labels`: None (or anything not an object)
    selects nothing, `{}` everything, and a malformed one nothing."""
    if type(selector) is not dict and not isinstance(selector, Mapping):
        return False
    match_labels = selector.get("matchLabels")
    if match_labels is None:
        match_labels = {}
    exprs = selector.get("matchExpressions")
    if exprs is None:
        exprs = []
    if type(exprs) is not list or (type(match_labels) is not dict and not isinstance(match_labels, Mapping)):
        return False
    for key, value in match_labels.items():
        if not isinstance(value, str) or labels.get(key) != value:
            return False
    return _requirements_hold(exprs, _LABEL_KINDS, labels)


def node_selector_term_matches(term: object, labels: Mapping[str, str], name: str) -> bool:
    """Whether a v1.NodeSelectorTerm selects the node with these labels and this name
    (component-helpers' nodeaffinity): `matchExpressions` over the labels (In, NotIn, Exists,
    DoesNotExist, Gt, Lt) and `matchFields` over `metadata.name` (In or NotIn, one value), all
    ANDed.  A term with neither, or with a requirement kube refuses, selects no node."""
    if type(term) is not dict and not isinstance(term, Mapping):
        return False
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not isinstance(exprs, list) or not isinstance(fields, list) or (not exprs and not fields):
        return False
    if not _requirements_hold(exprs, _NODE_KINDS, labels):
        return False
    for expr in fields:
        kind = _stored_kind(expr, _FIELD_KINDS)
        if kind is None or expr["key"] != "metadata.name" or len(expr["values"]) != 1:
            return False
        if not _holds(kind, name, expr["values"]):
            return False
    return True


# The lexer: identifiers run until a blank or one of these; `in`/`notin` are identifiers whose
# meaning depends on where they stand (so a label may be called `in`, as in Kubernetes).
_BLANKS = " \t\r\n"
_SYMBOLS = ("!=", "==", "!", "=", "(", ")", ",", ">", "<")
_SPECIAL = set("!=(),<>") | set(_BLANKS)
_END = ""


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "id", one of _SYMBOLS, or _END
    text: str
    at: int  # offset in the selector text, for messages


def _lex(text: str) -> Iterator[_Token]:
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _BLANKS:
            i += 1
        elif c in _SPECIAL:
            symbol = next(s for s in _SYMBOLS if text.startswith(s, i))
            yield _Token(symbol, symbol, i)
            i += len(symbol)
        else:
            start = i
            while i < n and text[i] not in _SPECIAL:
                i += 1
            yield _Token("id", text[start:i], start)
    yield _Token(_END, "", n)


_OPS_BY_TOKEN = {"=": Op.EQUALS, "==": Op.EQUALS, "!=": Op.NOT_EQUALS, ">": Op.GREATER_THAN, "<": Op.LESS_THAN}


class _LabelParser:
    """Recursive descent over the tokens; one instance parses one text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = list(_lex(text))
        self.pos = 0

    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        token = self.tokens[self.pos]
        if token.kind != _END:
            self.pos += 1
        return token

    def fail(self, token: _Token, expected: str) -> SelectorError:
        found = f"{token.text!r}" if token.kind != _END else "end of string"
        return SelectorError(
            f"unable to parse label selector {self.text!r}: found {found} at offset {token.at}, expected {expected}"
        )

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        if self.peek().kind == _END:
            return reqs
        while True:
            reqs.append(self.requirement())
            token = self.take()
            if token.kind == _END:
                return reqs
            if token.kind != ",":
                raise self.fail(token, "',' or end of string")

    def requirement(self) -> Requirement:
        token = self.take()
        if token.kind == "!":
            key = self.take()
            if key.kind != "id":
                raise self.fail(key, "a label key after '!'")
            return self.make(key.text, Op.DOES_NOT_EXIST, [])
        if token.kind != "id":
            raise self.fail(token, "a label key or '!'")
        key_text = token.text
        token = self.peek()
        if token.kind in (",", _END):
            return self.make(key_text, Op.EXISTS, [])
        self.take()
        if token.kind == "id" and token.text in ("in", "notin"):
            return self.make(key_text, Op(token.text), self.value_set())
        if token.kind not in _OPS_BY_TOKEN:
            raise self.fail(token, "one of '=', '==', '!=', 'in', 'notin', '>', '<'")
        value = self.peek()
        if value.kind in (",", _END):
            return self.make(key_text, _OPS_BY_TOKEN[token.kind], [""])
        if value.kind != "id":
            raise self.fail(value, "a value")
        self.take()
        return self.make(key_text, _OPS_BY_TOKEN[token.kind], [value.text])

    def value_set(self) -> list[str]:
        """`( v, v, ... )`: values may be empty (`(a,)`), and `()` is the one empty value, as kube's
        parseValues reads it (so `k in ()` selects an empty `k`, `k notin ()` a non-empty or absent one)."""
        token = self.take()
        if token.kind != "(":
            raise self.fail(token, "'('")
        if self.peek().kind == ")":
            self.take()
            return [""]
        values: list[str] = []
        while True:
            token = self.peek()
            if token.kind == "id":
                values.append(self.take().text)
            elif token.kind in (",", ")"):
                values.append("")
            else:
                raise self.fail(token, "a value, ',' or ')'")
            token = self.take()
            if token.kind == ")":
                return values
            if token.kind != ",":
                raise self.fail(token, "',' or ')'")

    def make(self, key: str, op: Op, values: list[str]) -> Requirement:
        try:
            return Requirement.make(key, op, values)
        except SelectorError as e:
            raise SelectorError(f"invalid label selector {self.text!r}: {e}") from None


# --- field selectors ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldTerm:
    """`field=value` or, with `negated`, `field!=value`."""

    field: str
    value: str
    negated: bool = False

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.field, "") == self.value) != self.negated

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.negated else '='}{escape_field_value(self.value)}"


_FIELD_OPS = ("!=", "==", "=")
# No field a resource offers has these; rejecting them keeps `parse(str(sel)) == sel`.
_BAD_FIELD_CHARS = set("!\\") | set(_BLANKS)


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """Terms that must all hold; no terms selects everything."""

    terms: tuple[FieldTerm, ...] = ()

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        """The `?fieldSelector=` text; "" selects everything.  Field names are not checked here."""
        if not isinstance(text, str):
            raise SelectorError(f"a field selector must be a string, not {type(text).__name__}")
        terms = []
        for raw in _split_unescaped(text, ","):
            if not raw:
                continue
            split = _split_term(raw)
            if split is None:
                raise SelectorError(f"invalid field selector {text!r}: {raw!r} has no operator (=, == or !=)")
            field, op, value = split
            field = field.strip(_BLANKS)
            if not field or any(c in _BAD_FIELD_CHARS for c in field):
                raise SelectorError(
                    f"invalid field selector {text!r}: {field!r} is not a field name (for example metadata.name)"
                )
            try:
                unescaped = unescape_field_value(value)
            except SelectorError as e:
                raise SelectorError(f"invalid field selector {text!r}: {field!r}: {e}") from None
            terms.append(FieldTerm(field, unescaped, op == "!="))
        return cls(tuple(terms))

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(t.matches(fields) for t in self.terms)

    def exact(self, field: str) -> str | None:
        """The value `field` must equal, when a term says so (lets a list narrow to one key)."""
        for term in self.terms:
            if term.field == field and not term.negated:
                return term.value
        return None

    def field_names(self) -> set[str]:
        return {t.field for t in self.terms}

    def empty(self) -> bool:
        return not self.terms

    def __str__(self) -> str:
        return ",".join(str(t) for t in self.terms)


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on `sep` where it is not escaped by a backslash (escapes are kept)."""
    parts: list[str] = []
    start, i, n = 0, 0, len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == sep:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def _split_term(term: str) -> tuple[str, str, str] | None:
    """The first unescaped operator splits the term: (field, op, raw value)."""
    i, n = 0, len(term)
    while i < n:
        if term[i] == "\\":
            i += 2
            continue
        for op in _FIELD_OPS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
        i += 1
    return None


def escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_field_value(raw: str) -> str:
    """Undo `\\\\`, `\\,`, `\\=`; any other escape, a lone trailing `\\`, or an unescaped `,` or `=` is an error."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if i + 1 >= n:
                raise SelectorError("the value ends in an unterminated escape '\\'")
            nxt = raw[i + 1]
            if nxt not in "\\,=":
                raise SelectorError(f"invalid escape sequence {c + nxt!r} in the value (only \\\\, \\, and \\= are)")
            out.append(nxt)
            i += 2
            continue
        if c in ",=":
            raise SelectorError(f"the value has an unescaped {c!r} (write \\{c})")
        out.append(c)
        i += 1
    return "".join(out)
