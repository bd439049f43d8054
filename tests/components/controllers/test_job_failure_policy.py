"""The first podFailurePolicy rule a failed pod matches, in kube's words (pure)."""

from __future__ import annotations

from typing import Any

from components.controllers._job_failure_policy import Match, match


def _job(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"podFailurePolicy": {"rules": list(rules)}}}


def _pod(codes: dict[str, int], conditions: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    statuses = [{"name": n, "state": {"terminated": {"exitCode": c}}} for n, c in codes.items()]
    return {
        "metadata": {"namespace": "ns", "name": "p"},
        "status": {
            "phase": "Failed",
            "containerStatuses": statuses,
            "conditions": [{"type": t, "status": s} for t, s in conditions],
        },
    }


def test_exit_codes_in_and_not_in() -> None:
    job = _job({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 2]}})
    assert match(job, _pod({"a": 2})) == Match(
        "FailJob", "Container a for pod ns/p failed with exit code 2 matching FailJob rule at index 0"
    )
    assert match(job, _pod({"a": 3})) is None
    not_in = _job({"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [5]}})
    assert match(not_in, _pod({"a": 0, "b": 7})) is not None  # b's 7; a's 0 never matches NotIn
    assert match(not_in, _pod({"a": 0, "b": 5})) is None


def test_the_first_matching_rule_wins_and_a_container_name_narrows() -> None:
    job = _job(
        {"action": "Ignore", "onExitCodes": {"containerName": "sidecar", "operator": "In", "values": [1]}},
        {"action": "Count", "onExitCodes": {"operator": "In", "values": [1]}},
    )
    got = match(job, _pod({"main": 1}))
    assert got is not None and got.action == "Count" and got.message.endswith("Count rule at index 1")


def test_pod_conditions() -> None:
    job = _job({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]})
    got = match(job, _pod({"a": 137}, (("DisruptionTarget", "True"),)))
    assert got == Match("Ignore", "Pod ns/p has condition DisruptionTarget matching Ignore rule at index 0")
    assert match(job, _pod({"a": 137}, (("DisruptionTarget", "False"),))) is None


def test_no_policy_or_junk_matches_nothing() -> None:
    assert match({"spec": {}}, _pod({"a": 1})) is None
    assert match(_job("junk", {"action": "FailJob"}), _pod({"a": 1})) is None  # type: ignore[arg-type]
