"""Label and field selectors: a table of Kubernetes' grammar and meaning, and fuzzing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.resources.base import ResourceDef
from apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    Op,
    Requirement,
    SelectorError,
    object_fields,
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
    ("app in ()", "non-empty"),
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
    assert str(LabelSelector.parse("app in (,)")) == "app in (,)"


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
    from apiserver.selectors import FieldTerm

    sel = FieldSelector(tuple(FieldTerm(f, v, neg) for f, v, neg in terms))
    again = FieldSelector.parse(str(sel))
    assert again == sel
    fields = {f: v for f, v, _ in terms}
    assert again.matches(fields) == sel.matches(fields)


def test_object_fields() -> None:
    pods = ResourceDef(
        "", "v1", "Pod", "pods", "pod", True, fields=lambda o: {"spec.nodeName": o.get("spec", {}).get("nodeName", "")}
    )
    nodes = ResourceDef("", "v1", "Node", "nodes", "node", False)
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}}
    assert object_fields(pods, pod) == {"metadata.name": "p", "metadata.namespace": "ns", "spec.nodeName": "n1"}
    assert object_fields(nodes, {"metadata": {"name": "n1"}}) == {"metadata.name": "n1"}


@pytest.mark.parametrize("text", ["=x", " =x", "a!b=x", "a b=x", "a\\,b=x", "a=1,!=2"])
def test_field_selector_rejects_odd_field_names(text: str) -> None:
    with pytest.raises(SelectorError, match="is not a field name"):
        FieldSelector.parse(text)
