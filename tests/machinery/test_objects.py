"""The tolerant readers of an object's fields: absent and mistyped fields read as neutral values."""

from __future__ import annotations

from typing import Any

import pytest

from machinery import objects
from machinery.objects import as_dict, dicts, get, items, mapping, number, text

POD: dict[str, Any] = {
    "metadata": {
        "name": "p",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "42",
        "labels": {"app": "web"},
        "annotations": {"a": "b"},
        "ownerReferences": [
            {"kind": "ReplicaSet", "name": "rs", "uid": "u-0"},
            "junk",
            {"kind": "ReplicaSet", "name": "rs2", "uid": "u-2", "controller": True},
        ],
    },
    "spec": {"containers": [{"name": "c"}, 3], "replicas": 2, "paused": True},
    "status": {"phase": "Running"},
}


def test_path_readers() -> None:
    assert get(POD, "metadata.labels.app") == "web"
    assert get(POD, "metadata.nope.deeper") is None
    assert get(POD, "spec.containers.name") is None  # a list on the way reads as absent
    assert text(POD, "status.phase") == "Running" and text(POD, "spec.replicas") == ""
    assert number(POD, "spec.replicas") == 2 and number(POD, "spec.paused") == 0  # true is not 1
    assert items(POD, "spec.containers") == [{"name": "c"}, 3] and items(POD, "spec.replicas") == []
    assert dicts(POD, "spec.containers") == [{"name": "c"}]
    assert mapping(POD, "metadata.labels") == {"app": "web"} and mapping(POD, "status.phase") == {}
    assert as_dict([1]) == {} and as_dict(None) == {}


def test_metadata_readers() -> None:
    assert objects.metadata(POD) is POD["metadata"]
    assert objects.spec(POD) is POD["spec"] and objects.status(POD) is POD["status"]
    assert (objects.name(POD), objects.namespace(POD), objects.uid(POD)) == ("p", "ns", "u-1")
    assert objects.resource_version(POD) == "42"
    assert objects.labels(POD) == {"app": "web"} and objects.annotations(POD) == {"a": "b"}
    assert [r["uid"] for r in objects.owner_references(POD)] == ["u-0", "u-2"]
    ref = objects.controller_ref(POD)
    assert ref is not None and ref["uid"] == "u-2"


def test_labels_are_a_copy() -> None:
    got = objects.labels(POD)
    got["extra"] = "x"
    assert POD["metadata"]["labels"] == {"app": "web"}


@pytest.mark.parametrize("obj", [None, {}, {"metadata": None}, {"metadata": "x"}, {"metadata": {"name": 3}}])
def test_absent_or_mistyped_reads_neutral(obj: Any) -> None:
    assert objects.name(obj) == "" and objects.namespace(obj) == "" and objects.resource_version(obj) == ""
    assert objects.labels(obj) == {} and objects.annotations(obj) == {}
    assert objects.owner_references(obj) == [] and objects.controller_ref(obj) is None
    assert objects.spec(obj) == {} and objects.status(obj) == {}
