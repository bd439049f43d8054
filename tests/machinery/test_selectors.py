"""Label and field selectors: a table of Kubernetes' grammar and meaning, and fuzzing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from machinery.selectors import (
    FieldSelector,
    LabelSelector,
    Op,
    Requirement,
    SelectorError,
    label_selector_matches,
    node_selector_term_matches,
)

WEB = {"app": "web", "tier": "front"}
DB = {"app": "db"}
NONE: dict[str, str] = {}

# (selector text, labels, matches?)
LABEL_MATCHES = [
    ("", WEB, True),
    ("   ", NONE, True),
    ("app=web", WEB, True),
    ("app==web", WEB, True),
    ("app = web", WEB, True),
    ("app=web", DB, False),
    ("app=web", NONE, False),
    ("app!=web", WEB, False),
    ("app!=web", DB, True),
    ("app!=web", NONE, True),  # absent counts as different
    ("app in (web,db)", WEB, True),
    ("app in (web, db)", DB, True),
    ("app in(web)", NONE, False),
    ("app notin (web)", WEB, False),
    ("app notin (web)", DB, True),
    ("app notin (web)", NONE, True),  # absent counts as not in
    ("tier", WEB, True),
    ("tier", DB, False),
    ("!tier", WEB, False),
    ("! tier", DB, True),
    ("app=web,tier=front", WEB, True),
    ("app=web,tier=back", WEB, False),
    ("app=web , !tier", WEB, False),
    ("app=", {"app": ""}, True),
    ("app=", WEB, False),
    ("app in (,web)", {"app": ""}, True),
    ("app in (,)", {"app": ""}, True),
    ("app in ()", {"app": ""}, True),  # kube's parseValues: `()` is the set holding ""
    ("app in ()", WEB, False),
    ("app notin ()", WEB, True),
    ("app in (a,)", {"app": ""}, True),
    ("in=x", {"in": "x"}, True),  # a label may be called `in`
    ("notin in (in)", {"notin": "in"}, True),
    ("example.com/app=web", {"example.com/app": "web"}, True),
    ("n>3", {"n": "4"}, True),
    ("n>3", {"n": "3"}, False),
    ("n<3", {"n": "-1"}, True),
    ("n<3", {"n": "x"}, False),
    ("n<3", NONE, False),
    ("a=b,a=c", {"a": "b"}, False),
]


@pytest.mark.parametrize(("text", "labels", "expected"), LABEL_MATCHES)
def test_label_selector_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    sel = LabelSelector.parse(text)
    assert sel.matches(labels) is expected
    again = LabelSelector.parse(str(sel))
    assert again == sel


# (selector text, a fragment the message must contain)
LABEL_ERRORS = [
    ("app=web,", "end of string"),
    (",app=web", "','"),
    ("app web", "'web'"),
    ("app in web", "'('"),
    ("app in (a b)", "'b'"),
    ("app in (a", "end of string"),
    ("app notin", "'('"),
    ("!", "label key"),
    ("!app=web", "'='"),
    ("app=(", "'('"),
    ("app==", ""),  # valid: empty value; checked below as not an error
    ("=web", "'='"),
    ("app=web)", "')'"),
    ("Bad_/x=1", "prefix"),
    ("/x=1", "prefix"),
    ("a/b/c=1", "at most one '/'"),
    ("example.com/=1", "name part"),
    ("-app=1", "'-app'"),
    ("a" * 64 + "=1", "63"),
    ("app=" + "v" * 64, "63"),
    ("app=-v", "'-v'"),
    ("app=v@", "'v@'"),
    ("app in (ok,b@d)", "'b@d'"),
    ("n>x", "integer"),
    ("n>", "integer"),
    ("app=web=x", "'='"),
    ("é=1", "'é'"),
]


@pytest.mark.parametrize(("text", "fragment"), [e for e in LABEL_ERRORS if e[1]])
def test_label_selector_errors(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as err:
        LabelSelector.parse(text)
    assert fragment in str(err.value)


def test_label_selector_canonical_text() -> None:
    sel = LabelSelector.parse(" tier notin (b,a,a), app==web,!x , y")
    assert str(sel) == "app=web,tier notin (a,b),!x,y"  # sorted by key
    assert LabelSelector.parse("app==").matches({"app": ""})
    assert LabelSelector.parse("app in (,)").requirements == (Requirement("app", Op.IN, ("",)),)
    assert str(LabelSelector.parse("app in (,)")) == "app in ()"
    assert LabelSelector.parse("app in ()") == LabelSelector.parse("app in (,)")


def test_empty_and_nothing() -> None:
    assert LabelSelector.parse("").empty()
    assert not LabelSelector.parse("a").empty()
    assert LabelSelector.from_dict({}).empty()
    assert LabelSelector.from_dict({"matchLabels": {}}).matches({"x": "y"})
    nothing = LabelSelector.from_dict(None)
    assert not nothing.empty()
    assert not nothing.matches({})


def test_from_dict() -> None:
    sel = LabelSelector.from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "team", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
            ],
        }
    )
    assert str(sel) == "app=web,env notin (prod),!legacy,team,tier in (edge,front)"
    assert sel.matches({"app": "web", "tier": "edge", "team": "t"})
    assert not sel.matches({"app": "web", "tier": "edge", "team": "t", "legacy": "1"})
    assert not sel.matches({"app": "web", "tier": "edge", "team": "t", "env": "prod"})
    assert not sel.matches({"app": "web", "tier": "back", "team": "t"})


FROM_DICT_ERRORS: list[tuple[Any, str]] = [
    ("app=web", "must be an object"),
    ({"matchLabel": {}}, "unknown field 'matchLabel'"),
    ({"matchLabels": []}, "matchLabels must be an object"),
    ({"matchLabels": {"app": 1}}, "matchLabels['app']"),
    ({"matchLabels": {"app": None}}, "null"),
    ({"matchLabels": {"bad key": "x"}}, "matchLabels['bad key']"),
    ({"matchLabels": {"app": "bad value"}}, "'bad value'"),
    ({"matchExpressions": {}}, "must be a list"),
    ({"matchExpressions": ["x"]}, "matchExpressions[0]: must be an object"),
    ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "matchExpressions[0].values: must be non-empty"),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}, "non-empty"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "must be empty"),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]}, "must be empty"),
    ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "'Gt' is not a valid operator"),
    ({"matchExpressions": [{"key": "a", "operator": "in", "values": ["1"]}]}, "'in' is not a valid operator"),
    ({"matchExpressions": [{"operator": "Exists"}]}, "matchExpressions[0].key: required"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}, "list of strings"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}, "list of strings"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"], "x": 1}]}, "unknown field 'x'"),
    ({"matchExpressions": [{"key": "", "operator": "Exists"}]}, "name part must be non-empty"),
]


@pytest.mark.parametrize(("sel", "fragment"), FROM_DICT_ERRORS)
def test_from_dict_errors(sel: Any, fragment: str) -> None:
    with pytest.raises(SelectorError) as err:
        LabelSelector.from_dict(sel)
    assert fragment in str(err.value)


# --- hypothesis: generated selectors round-trip through their text --------------------------

names = st.from_regex(r"[a-cA-C0-9]([-a-cA-C0-9_.]{0,4}[a-cA-C0-9])?", fullmatch=True) | st.sampled_from(
    ["in", "notin", "a" * 63]
)
prefixes = st.sampled_from(["", "example.com/", "k8s.io/", "a-b.c/"])
keys = st.builds(lambda p, n: p + n, prefixes, names)
values = st.just("") | names
ints = st.integers(-(2**63), 2**63 - 1).map(str)


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    op = draw(st.sampled_from(list(Op)))
    key = draw(keys)
    if op in (Op.IN, Op.NOT_IN):
        vals = draw(st.lists(values, min_size=1, max_size=3))
    elif op in (Op.GREATER_THAN, Op.LESS_THAN):
        vals = [draw(ints)]
    elif op in (Op.EQUALS, Op.NOT_EQUALS):
        vals = [draw(values)]
    else:
        vals = []
    return Requirement.make(key, op, vals)


label_sets = st.dictionaries(keys, values | ints, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(requirements(), max_size=4), st.lists(label_sets, max_size=4))
def test_label_selector_round_trips(reqs: list[Requirement], samples: list[dict[str, str]]) -> None:
    sel = LabelSelector.of(reqs)
    again = LabelSelector.parse(str(sel))
    assert again == sel
    for labels in samples:
        assert again.matches(labels) == sel.matches(labels) == all(r.matches(labels) for r in reqs)


# --- stored selectors: the scheduler's and the controllers' matcher ------------------------------
#
# Three copies matched stored metav1.LabelSelectors and disagreed: the apiserver's ignored an
# unknown operator (the requirement passed), the scheduler's failed the selector, and only one
# of them read a null selector as selecting nothing.  kube's LabelSelectorAsSelector refuses an
# unknown operator, In/NotIn without values and Exists/DoesNotExist with values, and its callers
# then select nothing.

STORED = [
    (None, WEB, False),
    ({}, WEB, True),
    ({"matchLabels": {"app": "web"}}, WEB, True),
    ({"matchLabels": {"app": "web"}}, DB, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}, WEB, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}, DB, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, DB, False),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, DB, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Near", "values": ["x"]}]}, WEB, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": []}]}, WEB, False),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn"}]}, DB, False),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["front"]}]}, WEB, False),
    ({"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["1"]}]}, {"n": "2"}, False),  # nodes only
    ({"matchExpressions": "tier"}, WEB, False),
    ({"matchLabels": {"app": None}}, DB, False),
    ("app=web", WEB, False),
]


@pytest.mark.parametrize(("selector", "labels", "expected"), STORED)
def test_stored_label_selector(selector: Any, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_matches(selector, labels) is expected


operators = st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Near", ""])
stored_expressions = st.fixed_dictionaries(
    {"key": st.sampled_from(["a", "b", "k8s.io/c"]), "operator": operators},
    optional={"values": st.lists(st.sampled_from(["", "x", "y", "1"]), max_size=3)},
)
stored_selectors = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["", "x", "y"]), max_size=2),
        "matchExpressions": st.lists(stored_expressions, max_size=3),
    },
)
small_labels = st.dictionaries(st.sampled_from(["a", "b", "k8s.io/c"]), st.sampled_from(["", "x", "y", "1"]))


@settings(max_examples=400, deadline=None)
@given(stored_selectors, small_labels)
def test_stored_matcher_is_the_validated_selector(selector: Any, labels: dict[str, str]) -> None:
    """The fast stored matcher and `LabelSelector.from_dict` (the apiserver's, which refuses with
    422) agree: where kube's conversion fails the stored one selects nothing, else both match alike."""
    try:
        parsed = LabelSelector.from_dict(selector)
    except SelectorError:
        assert not label_selector_matches(selector, labels)
        return
    assert label_selector_matches(selector, labels) == parsed.matches(labels)


def _model_requirement(op: str, values: list[str], value: str | None) -> bool | None:
    """kube's selector.go Matches for one requirement; None where NewRequirement errs."""
    if (op in ("In", "NotIn") and not values) or (op in ("Exists", "DoesNotExist") and values):
        return None
    if op in ("Gt", "Lt"):
        if len(values) != 1 or not values[0].lstrip("-").isdigit():
            return None
        if value is None or not value.lstrip("-").isdigit():
            return False
        return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
    return {
        "In": value is not None and value in values,
        "NotIn": value is None or value not in values,
        "Exists": value is not None,
        "DoesNotExist": value is None,
    }.get(op)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "key": st.sampled_from(["a", "b"]),
                "operator": st.sampled_from(["In", "NotIn", "Exists", "Gt", "Lt", "X"]),
            },
            optional={"values": st.lists(st.sampled_from(["x", "1", "-2", "10"]), max_size=2)},
        ),
        max_size=3,
    ),
    st.lists(
        st.fixed_dictionaries(
            {
                "key": st.just("metadata.name"),
                "operator": st.sampled_from(["In", "NotIn"]),
                "values": st.lists(st.sampled_from(["n1", "n2"]), max_size=2),
            }
        ),
        max_size=1,
    ),
    st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["x", "1", "5", "-3"])),
    st.sampled_from(["n1", "n2"]),
)
def test_node_selector_term_matches_the_model(
    exprs: list[dict[str, Any]], fields: list[dict[str, Any]], labels: dict[str, str], name: str
) -> None:
    term = {"matchExpressions": exprs, "matchFields": fields}
    verdicts = [_model_requirement(e["operator"], e.get("values", []), labels.get(e["key"])) for e in exprs]
    verdicts += [
        _model_requirement(f["operator"], f["values"], name) if len(f["values"]) == 1 else None for f in fields
    ]
    expected = bool(exprs or fields) and all(v is True for v in verdicts)
    assert node_selector_term_matches(term, labels, name) == expected


def test_node_selector_terms() -> None:
    labels = {"zone": "a", "cpus": "8"}
    assert node_selector_term_matches(
        {"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["4"]}]}, labels, "n1"
    )
    assert not node_selector_term_matches(
        {"matchExpressions": [{"key": "cpus", "operator": "Lt", "values": ["4"]}]}, labels, "n1"
    )
    assert not node_selector_term_matches(
        {"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["4", "5"]}]}, labels, "n1"
    )
    assert not node_selector_term_matches({}, labels, "n1")  # a term with no requirements selects no node
    assert node_selector_term_matches(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}, labels, "n1"
    )
    # matchFields: In/NotIn with one value on metadata.name only (kube's NodeSelectorRequirementsAsFieldSelector)
    assert not node_selector_term_matches(
        {"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}, labels, "n1"
    )
    assert not node_selector_term_matches(
        {"matchFields": [{"key": "spec.x", "operator": "In", "values": ["n1"]}]}, labels, "n1"
    )


selector_alphabet = st.sampled_from([*"ab=!(),<> \t\\/.-_1é\x00", "in", "notin", " in ", "=="])


@settings(max_examples=500, deadline=None)
@given(st.text() | st.lists(selector_alphabet, max_size=20).map("".join))
def test_any_text_raises_only_selector_error(text: str) -> None:
    for parse in (LabelSelector.parse, FieldSelector.parse):
        try:
            sel = parse(text)
        except SelectorError:
            continue
        assert parse(str(sel)) == sel


# --- field selectors -------------------------------------------------------------------------

POD = {"metadata.name": "p", "metadata.namespace": "default", "spec.nodeName": "n1", "status.phase": "Running"}

FIELD_MATCHES = [
    ("", POD, True),
    ("metadata.name=p", POD, True),
    ("metadata.name==p", POD, True),
    ("metadata.name!=p", POD, False),
    ("spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed", POD, True),
    ("spec.nodeName=n2", POD, False),
    ("spec.nodeName=", {"spec.nodeName": ""}, True),
    ("spec.nodeName=", {}, True),  # a missing field reads as ""
    ("spec.nodeName!=", {}, False),
    ("a=x\\,y", {"a": "x,y"}, True),
    ("a=x\\=y", {"a": "x=y"}, True),
    ("a=x\\\\y", {"a": "x\\y"}, True),
    ("a=x\\,y,b=1", {"a": "x,y", "b": "1"}, True),
    ("a=1,,b=1", {"a": "1", "b": "1"}, True),
    (" a = 1", {"a": " 1"}, True),  # the value keeps its blanks, as Kubernetes
]


@pytest.mark.parametrize(("text", "fields", "expected"), FIELD_MATCHES)
def test_field_selector_matches(text: str, fields: dict[str, str], expected: bool) -> None:
    sel = FieldSelector.parse(text)
    assert sel.matches(fields) is expected
    assert FieldSelector.parse(str(sel)) == sel


FIELD_ERRORS = [
    ("metadata.name", "no operator"),
    ("a=1,b", "'b' has no operator"),
    ("a=b=c", "unescaped '='"),
    ("a=x\\", "unterminated"),
    ("a=x\\n", "invalid escape sequence"),
]


@pytest.mark.parametrize(("text", "fragment"), FIELD_ERRORS)
def test_field_selector_errors(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as err:
        FieldSelector.parse(text)
    assert fragment in str(err.value)


def test_field_selector_accessors() -> None:
    sel = FieldSelector.parse("metadata.name=p,status.phase!=Failed,metadata.name=q")
    assert sel.exact("metadata.name") == "p"
    assert sel.exact("status.phase") is None
    assert sel.exact("spec.nodeName") is None
    assert sel.field_names() == {"metadata.name", "status.phase"}
    assert not sel.empty()
    assert FieldSelector.parse("").empty()
    assert str(FieldSelector.parse("a==x\\,y")) == "a=x\\,y"


field_names_st = st.text("abcXYZ.019", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(field_names_st, st.text(max_size=8), st.booleans()), max_size=4))
def test_field_selector_round_trips(terms: list[tuple[str, str, bool]]) -> None:
    from machinery.selectors import FieldTerm

    sel = FieldSelector(tuple(FieldTerm(f, v, neg) for f, v, neg in terms))
    again = FieldSelector.parse(str(sel))
    assert again == sel
    fields = {f: v for f, v, _ in terms}
    assert again.matches(fields) == sel.matches(fields)


@pytest.mark.parametrize("text", ["=x", " =x", "a!b=x", "a b=x", "a\\,b=x", "a=1,!=2"])
def test_field_selector_rejects_odd_field_names(text: str) -> None:
    with pytest.raises(SelectorError, match="is not a field name"):
        FieldSelector.parse(text)
