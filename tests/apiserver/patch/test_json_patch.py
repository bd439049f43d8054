"""RFC 6902 JSON patch with Kubernetes' answers: 400 malformed, 413 too many, 422 does not apply."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.patch.errors import PatchError
from apiserver.patch.json_patch import MAX_OPERATIONS, apply_json_patch

POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "a", "image": "nginx"}], "replicas": 1},
}

# (patch, what part of the result to look at, expected)
APPLIES: list[tuple[list[dict[str, Any]], str, Any]] = [
    ([], "spec", POD["spec"]),
    (
        [{"op": "add", "path": "/metadata/labels/tier", "value": "db"}],
        "metadata",
        {"name": "p", "labels": {"app": "web", "tier": "db"}},
    ),
    ([{"op": "remove", "path": "/metadata/labels"}], "metadata", {"name": "p"}),
    ([{"op": "replace", "path": "/spec/replicas", "value": 3}], "spec.replicas", 3),
    ([{"op": "add", "path": "/spec/containers/-", "value": {"name": "b"}}], "spec.containers.1", {"name": "b"}),
    ([{"op": "add", "path": "/spec/containers/0", "value": {"name": "z"}}], "spec.containers.0", {"name": "z"}),
    ([{"op": "copy", "from": "/spec/replicas", "path": "/spec/copied"}], "spec.copied", 1),
    (
        [{"op": "move", "from": "/spec/replicas", "path": "/spec/moved"}],
        "spec",
        {"containers": POD["spec"]["containers"], "moved": 1},
    ),
    (
        [{"op": "test", "path": "/spec/replicas", "value": 1}, {"op": "replace", "path": "/spec/replicas", "value": 2}],
        "spec.replicas",
        2,
    ),
    (
        [
            {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "c"}},
            {"op": "remove", "path": "/metadata/annotations/a~1b"},
        ],
        "metadata.annotations",
        {},
    ),
]


def _dig(doc: Any, where: str) -> Any:
    for part in where.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


@pytest.mark.parametrize(("patch", "where", "expected"), APPLIES)
def test_applies(patch: list[dict[str, Any]], where: str, expected: Any) -> None:
    before = copy.deepcopy(POD)
    result = apply_json_patch(POD, patch)
    assert _dig(result, where) == expected
    assert before == POD  # the stored object is not changed


# (patch body, status code, a fragment of the message)
FAILS: list[tuple[Any, int, str]] = [
    ({"op": "add"}, 400, "must be a list of operations, not an object"),
    (None, 400, "not null"),
    ("[]", 400, "not a string"),
    ([1], 400, "operation 0 must be an object, not a number"),
    ([{"op": "add", "path": "/a", "value": 1}, []], 400, "operation 1 must be an object, not a list"),
    ([{"op": "frobnicate", "path": "/a"}], 422, "operation 0 (frobnicate /a)"),
    ([{"path": "/a"}], 422, "(? /a)"),
    ([{"op": "add", "value": 1}], 422, "'path'"),
    ([{"op": "add", "path": "/a"}], 422, "'value'"),
    ([{"op": "move", "path": "/a"}], 422, "'from'"),
    ([{"op": "remove", "path": "/spec/nope"}], 422, "(remove /spec/nope): /spec/nope does not exist"),
    ([{"op": "replace", "path": "/spec/nope", "value": 1}], 422, "/spec/nope does not exist"),
    ([{"op": "add", "path": "/nope/deeper", "value": 1}], 422, "(add /nope/deeper): /nope does not exist"),
    ([{"op": "add", "path": "/spec/containers/5", "value": 1}], 422, "outside of list"),
    ([{"op": "add", "path": "spec", "value": 1}], 422, "must start with /"),
    ([{"op": "test", "path": "/spec/replicas", "value": 2}], 422, "test failed: /spec/replicas is 1, not 2"),
    ([{"op": "test", "path": "/spec/replicas", "value": True}], 422, "/spec/replicas is 1, not true"),
    ([{"op": "test", "path": "/spec/nope", "value": 1}], 422, "test failed: /spec/nope does not exist"),
    ([{"op": "replace", "path": "", "value": [1]}], 422, "leaves a list where an object must be"),
    ([{"op": "remove", "path": ""}], 422, "remove"),
    ([{"op": 7, "path": "/a"}], 422, "operation 0 (7 /a)"),
    ([{"op": "copy", "from": "/spec/containers/1", "path": "/a"}], 422, "/spec/containers is a list of 1"),
    ([{"op": "move", "from": "/metadata/name/x", "path": "/a"}], 422, "(/metadata/name is a string)"),
    ([{"op": "add", "path": "/spec/~2", "value": 1}], 422, "~2"),
    ([{"op": "add", "path": 7, "value": 1}], 422, "operation 0 (add 7)"),
    ([{"op": "add", "path": "/spec/replicas/x", "value": 1}], 422, "/spec/replicas is a number, which has no members"),
]


@pytest.mark.parametrize(("patch", "code", "fragment"), FAILS)
def test_fails(patch: Any, code: int, fragment: str) -> None:
    before = copy.deepcopy(POD)
    with pytest.raises(PatchError) as err:
        apply_json_patch(POD, patch)
    assert err.value.code == code
    assert fragment in str(err.value)
    assert before == POD


def test_all_or_nothing() -> None:
    patch = [{"op": "replace", "path": "/spec/replicas", "value": 9}, {"op": "remove", "path": "/nope"}]
    with pytest.raises(PatchError, match="operation 1"):
        apply_json_patch(POD, patch)
    assert POD["spec"]["replicas"] == 1


def test_too_many_operations() -> None:
    ops = [{"op": "test", "path": "/spec/replicas", "value": 1}] * (MAX_OPERATIONS + 1)
    with pytest.raises(PatchError) as err:
        apply_json_patch(POD, ops)
    assert err.value.code == 413
    assert err.value.to_status_error().reason == "RequestEntityTooLarge"


def test_status_errors() -> None:
    with pytest.raises(PatchError) as err:
        apply_json_patch(POD, {})
    assert err.value.to_status_error().to_status()["code"] == 400
    with pytest.raises(PatchError) as err:
        apply_json_patch(POD, [{"op": "remove", "path": "/nope"}])
    status = err.value.to_status_error().to_status()
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert "remove /nope" in status["message"]
    assert "remove /nope" in status["details"]["causes"][0]["message"]


json_leaf = st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab~/-01", max_size=3)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("ab~/01", max_size=3), inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text("ab~/01", max_size=3), json_values, max_size=4)


@settings(max_examples=300, deadline=None)
@given(json_objects, json_objects)
def test_a_diff_applies(a: dict[str, Any], b: dict[str, Any]) -> None:
    patch = jsonpatch.make_patch(a, b).patch
    assert apply_json_patch(a, patch) == b


pointers = st.lists(st.sampled_from(["a", "b", "0", "1", "-", "~1", "~0", "~2", "", "01"]), max_size=3).map(
    lambda parts: "".join("/" + p for p in parts)
) | st.sampled_from(["", "a", "/", 7, None])
operations = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "append", "", 1])},
    optional={"path": pointers, "from": pointers, "value": json_values},
)
bodies = st.lists(operations | json_values, max_size=4) | json_values


@settings(max_examples=500, deadline=None)
@given(json_objects, bodies)
def test_any_patch_raises_only_patch_error(doc: dict[str, Any], patch: Any) -> None:
    before = copy.deepcopy(doc)
    try:
        result = apply_json_patch(doc, patch)
    except PatchError as e:
        assert e.code in (400, 422)
    else:
        assert isinstance(result, dict)
    assert doc == before
