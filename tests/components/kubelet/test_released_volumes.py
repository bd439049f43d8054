"""Removing deleted local volumes' directories: only names the provisioner makes, only directly
under the node's volume directory, a symlink unlinked and never followed; and the annotation the
controller writes read defensively (anyone allowed to patch Nodes can write it)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from components.kubelet.released_volumes import remove
from machinery import local_volumes
from machinery.local_volumes import RELEASED_ANNOTATION, released


def test_a_released_volume_directory_is_removed_and_nothing_else(tmp_path: Path) -> None:
    volumes = tmp_path / "local-volumes"
    (volumes / "pvc-1234" / "deep").mkdir(parents=True)
    (volumes / "pvc-1234" / "deep" / "f").write_text("x")
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    (volumes / "pvc-link").symlink_to(outside)

    assert remove(volumes, "pvc-1234") and not (volumes / "pvc-1234").exists()
    assert remove(volumes, "pvc-link") and not (volumes / "pvc-link").exists()
    assert (outside / "keep").read_text() == "keep"  # the link went, not what it pointed at
    assert remove(volumes, "pvc-never-there")
    for hostile in ("../precious", "pvc-1/../../precious", "precious", "/", ""):
        assert remove(volumes, hostile)  # not ours: nothing touched
    assert (outside / "keep").exists() and volumes.exists()


def test_the_released_list_keeps_only_names_the_provisioner_makes() -> None:
    value = json.dumps(["pvc-a1", "../etc", 7, "pvc-b2", "PVC-UPPER", "pvc-" + "x" * 80])
    assert released({RELEASED_ANNOTATION: value}) == ["pvc-a1", "pvc-b2"]
    for hostile in ("not json", '{"a": 1}', "null", ""):
        assert released({RELEASED_ANNOTATION: hostile}) == []
    assert released(None) == [] and released({}) == []
    many = json.dumps([f"pvc-{i}" for i in range(local_volumes.MAX_RELEASED + 50)])
    assert len(released({RELEASED_ANNOTATION: many})) == local_volumes.MAX_RELEASED


@given(st.one_of(st.text(max_size=200), st.lists(st.one_of(st.text(max_size=40), st.integers()), max_size=20)))
def test_any_annotation_value_reads_as_a_list_of_safe_names(raw: object) -> None:
    value = raw if isinstance(raw, str) else json.dumps(raw)
    for name in released({RELEASED_ANNOTATION: value}):
        assert local_volumes.VOLUME_NAME.fullmatch(name) and "/" not in name and ".." not in name
