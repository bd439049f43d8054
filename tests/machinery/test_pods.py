"""A pod's readiness and termination, read the way every reader must agree on."""

from __future__ import annotations

from typing import Any

from machinery.pods import is_ready, is_terminating, ready_condition


def pod(*conditions: Any, **meta: Any) -> dict[str, Any]:
    return {"metadata": meta, "status": {"conditions": list(conditions)}}


def test_ready_is_the_ready_condition_true() -> None:
    assert is_ready(pod({"type": "Ready", "status": "True"}))
    assert not is_ready(pod({"type": "Ready", "status": "False"}))
    assert not is_ready(pod({"type": "Ready", "status": "Unknown"}))
    assert not is_ready(pod({"type": "ContainersReady", "status": "True"}))
    assert not is_ready(pod())
    assert not is_ready({})


def test_the_first_ready_condition_counts() -> None:
    first = {"type": "Ready", "status": "False"}
    p = pod({"type": "PodScheduled", "status": "True"}, first, {"type": "Ready", "status": "True"})
    assert ready_condition(p) is first
    assert not is_ready(p)


def test_malformed_status_is_not_ready() -> None:
    assert not is_ready({"status": "x"})
    assert not is_ready({"status": {"conditions": {"type": "Ready"}}})
    assert not is_ready({"status": {"conditions": ["Ready", None]}})


def test_terminating_once_a_deletion_timestamp_is_set() -> None:
    assert is_terminating(pod(deletionTimestamp="2024-01-01T00:00:00Z"))
    assert not is_terminating(pod())
    assert not is_terminating(pod(deletionTimestamp=None))
    assert not is_terminating({"metadata": "x"})
