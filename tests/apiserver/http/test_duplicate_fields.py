"""Repeated keys in a JSON body, named as kube's strict decoder names them."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.http.duplicate_fields import duplicate_paths
from apiserver.pruning import MAX_REPORTED


def test_repeated_keys_are_named_by_their_path_in_document_order() -> None:
    body = b"""{"spec": {"unknownField": "foo", "replicas": 2, "replicas": 3,
               "template": {"spec": {"containers": [{"name": "a", "name": "b"}]}}},
               "kind": "Deployment", "kind": "Deployment"}"""
    assert duplicate_paths(body) == ["kind", "spec.replicas", "spec.template.spec.containers[0].name"]


def test_nothing_repeated_or_not_json_names_nothing() -> None:
    assert duplicate_paths(b'{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}') == []
    assert duplicate_paths(b"not json") == []
    assert duplicate_paths(b"[" * 100_000) == []  # too deep for the stdlib: judged elsewhere


def test_a_body_of_many_repeats_names_a_bounded_number() -> None:
    body = ("{" + ",".join(f'"k": {i}' for i in range(10_000)) + "}").encode()
    assert duplicate_paths(body) == ["k"]
    many = ("{" + ",".join(f'"o{i}": {{"x": 1, "x": 2}}' for i in range(1_000)) + "}").encode()
    assert len(duplicate_paths(many)) == MAX_REPORTED


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=3), kids, max_size=4),
        max_leaves=20,
    )
)
def test_a_body_without_repeats_never_reports_any(value: object) -> None:
    assert duplicate_paths(json.dumps({"root": value}).encode()) == []
