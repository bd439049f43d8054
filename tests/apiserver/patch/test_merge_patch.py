"""RFC 7386 merge patch: the RFC's examples, Kubernetes' 400 for a non-object body, and properties."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.patch.errors import PatchError
from apiserver.patch.merge_patch import apply_merge_patch, merge_patch

# RFC 7386 appendix A, every example
RFC_EXAMPLES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC_EXAMPLES)
def test_rfc_examples(target: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy(target)
    assert merge_patch(target, patch) == expected
    assert target == before


def test_kubectl_scale_and_label_removal() -> None:
    deployment: dict[str, Any] = {
        "metadata": {"name": "d", "labels": {"app": "d", "old": "x"}},
        "spec": {"replicas": 1, "paused": True},
    }
    patched = apply_merge_patch(deployment, {"spec": {"replicas": 5}, "metadata": {"labels": {"old": None}}})
    assert patched == {"metadata": {"name": "d", "labels": {"app": "d"}}, "spec": {"replicas": 5, "paused": True}}
    assert deployment["spec"]["replicas"] == 1


def test_result_shares_nothing_with_inputs() -> None:
    doc: dict[str, Any] = {"spec": {"keep": {"x": 1}}}
    patch: dict[str, Any] = {"spec": {"new": {"y": [1]}}}
    patched = apply_merge_patch(doc, patch)
    patched["spec"]["keep"]["x"] = 2
    patched["spec"]["new"]["y"].append(2)
    assert doc == {"spec": {"keep": {"x": 1}}}
    assert patch == {"spec": {"new": {"y": [1]}}}


@pytest.mark.parametrize(
    ("body", "fragment"), [(None, "not null"), ([{"a": 1}], "not a list"), ("x", "not a string"), (3, "not a number")]
)
def test_body_must_be_an_object(body: Any, fragment: str) -> None:
    with pytest.raises(PatchError) as err:
        apply_merge_patch({"a": 1}, body)
    assert err.value.code == 400
    assert fragment in str(err.value)
    assert err.value.to_status_error().reason == "BadRequest"


def test_deep_nesting_is_a_patch_error() -> None:
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(PatchError, match="nests too deeply"):
        apply_merge_patch({}, deep)


def create_merge_patch(a: Any, b: Any) -> Any:
    """The merge patch that turns `a` into `b` (for values without nulls): the test's own diff."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return b
    patch: dict[str, Any] = {name: None for name in a if name not in b}
    for name, value in b.items():
        if name not in a:
            patch[name] = value
        elif isinstance(value, dict) and isinstance(a[name], dict):
            inner = create_merge_patch(a[name], value)
            if inner:
                patch[name] = inner
        elif a[name] != value or type(a[name]) is not type(value):
            patch[name] = value
    return patch


keys = st.text("abc", max_size=2)
leaves = st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=3)
values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3), max_leaves=10
)
objects = st.dictionaries(keys, values, max_size=4)


@settings(max_examples=300, deadline=None)
@given(values, values)
def test_a_computed_diff_gives_the_target(a: Any, b: Any) -> None:
    patch = create_merge_patch(a, b)
    assert merge_patch(a, patch) == b


@settings(max_examples=200, deadline=None)
@given(objects, st.dictionaries(keys, st.none() | values, max_size=4))
def test_applying_twice_changes_nothing_more(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    once = apply_merge_patch(doc, patch)
    assert apply_merge_patch(once, patch) == once
    for name, value in patch.items():
        if value is None:
            assert name not in once
