"""What a patch may build, at the patch modules themselves: JSON patch copies count against
kube's 3 MiB copy budget during application, and every patch type's result is measured before
it is returned (413 past the request limit, in kube's words)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from apiserver.errors import StatusError
from apiserver.http.params import WriteParams
from apiserver.http.patching import apply_patch
from apiserver.patch.apply import server_side_apply
from apiserver.patch.errors import PatchError
from apiserver.patch.json_patch import MAX_COPY_BYTES, apply_json_patch
from apiserver.patch.jsonvalue import MAX_RESULT_BYTES, check_result
from apiserver.patch.merge_patch import apply_merge_patch
from apiserver.patch.schema import meta_for
from apiserver.patch.strategic import apply_strategic_merge_patch

MIB = 1024 * 1024


def cm(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": data}


def doubling(copies: int, size: int = 100_000) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/metadata/annotations", "value": {"big": "x" * size}}]
    ops += [
        {"op": "copy", "from": "/metadata/annotations", "path": f"/metadata/annotations/x{i}"} for i in range(copies)
    ]
    return ops


def test_thirty_doubling_copies_stop_at_the_copy_budget_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(PatchError) as caught:
        apply_json_patch(cm(), doubling(30))
    assert time.monotonic() - started < 2
    assert caught.value.code == 422
    message = caught.value.message
    assert message.startswith("JSON patch operation 6 (copy /metadata/annotations/x5): Unable to complete the copy")
    assert f"exceeding the limit {MAX_COPY_BYTES}" in message


def test_copies_within_the_budget_apply() -> None:
    result = apply_json_patch(cm(), doubling(4))  # 100 KB, 200, 400, 800: 1.5 MB copied
    assert len(result["metadata"]["annotations"]) == 5
    assert result["metadata"]["annotations"]["x3"]["x2"]["big"] == "x" * 100_000


def test_the_copy_budget_counts_every_copy_of_the_patch() -> None:
    """Copied and removed again still counts, as in kube: the budget is the work done."""
    doc = cm(a="y" * (1100 * 1024))
    ops = [{"op": "copy", "from": "/data/a", "path": "/data/b"}, {"op": "remove", "path": "/data/b"}] * 2
    assert apply_json_patch(doc, ops) == doc
    with pytest.raises(PatchError, match=r"operation 4 .*accumulated size increase of copy is"):
        apply_json_patch(doc, [*ops, {"op": "copy", "from": "/data/a", "path": "/data/b"}])


def test_a_copy_from_nowhere_fails_as_before() -> None:
    with pytest.raises(PatchError, match="/nope does not exist"):
        apply_json_patch(cm(), [{"op": "copy", "from": "/nope", "path": "/data/x"}])


def test_check_result_is_413_in_kubes_words_past_the_limit() -> None:
    check_result({"a": "x" * (MAX_RESULT_BYTES - 100)})
    with pytest.raises(PatchError) as caught:
        check_result({"a": "x" * MAX_RESULT_BYTES})
    assert caught.value.code == 413
    status = caught.value.to_status_error()
    assert (status.code, status.reason) == (413, "RequestEntityTooLarge")
    assert status.message.startswith("Request entity too large: limit is 3145728")
    deep: Any = {}
    for _ in range(150):
        deep = {"a": deep}
    with pytest.raises(PatchError, match="nested more than 100 levels") as too_deep:
        check_result(deep)
    assert too_deep.value.code == 422


def test_a_json_patch_moving_a_value_deeper_than_the_limit_is_refused() -> None:
    doc: dict[str, Any] = {"a": {}}
    inner: Any = doc["a"]
    for _ in range(98):
        inner["a"] = {}
        inner = inner["a"]
    ops = [
        {"op": "add", "path": "/b", "value": {"c": {"d": {}}}},
        {"op": "move", "from": "/b", "path": "/a" * 99 + "/z"},
    ]
    with pytest.raises(PatchError, match="nested more than 100 levels"):
        apply_json_patch(doc, ops)


@pytest.mark.parametrize(
    "patched",
    [
        lambda doc, big: apply_merge_patch(doc, {"data": {"b": big}}),
        lambda doc, big: apply_strategic_merge_patch(doc, {"data": {"b": big}}, meta_for("", "v1", "ConfigMap")),
        lambda doc, big: server_side_apply(
            None, {**doc, "data": {**doc["data"], "b": big}}, "m", False, meta_for("", "v1", "ConfigMap"), "now"
        ),
        lambda doc, big: apply_json_patch(doc, [{"op": "add", "path": "/data/b", "value": big}]),
    ],
    ids=["merge", "strategic", "apply", "json"],
)
def test_every_patch_type_measures_its_result(patched: Any) -> None:
    doc = cm(a="x" * (2 * MIB))
    with pytest.raises(PatchError) as caught:
        patched(doc, "y" * (2 * MIB))
    assert caught.value.code == 413
    assert patched(doc, "small")["data"]["b"] == "small"


def test_the_http_layer_answers_the_patch_errors_code() -> None:
    """413 and 400 from the patch modules reach the client as such (they were all 422)."""
    w = WriteParams(dry_run=False, field_manager="m", field_validation="Ignore", force=False)
    for content_type, body in [
        ("application/merge-patch+json", {"data": {"b": "y" * (2 * MIB)}}),
        ("application/json-patch+json", [{"op": "test", "path": "/a", "value": 1}] * 10_001),
    ]:
        with pytest.raises(StatusError) as caught:
            apply_patch(content_type, cm(a="x" * (2 * MIB)), body, "ConfigMap", "", w)
        assert (caught.value.code, caught.value.reason) == (413, "RequestEntityTooLarge"), caught.value
