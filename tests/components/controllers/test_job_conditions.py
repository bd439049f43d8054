"""A finished job's conditions as kube-apiserver 1.33 accepts them: SuccessCriteriaMet before
Complete, FailureTarget before Failed (components.controllers._job_status.finished_conditions)."""

from __future__ import annotations

from components.controllers._job_status import Verdict, finished_conditions

NOW = "2026-12-04T22:00:00Z"


def _types(conditions: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(c["type"], c["status"]) for c in conditions]


def test_complete_follows_success_criteria_met() -> None:
    out = finished_conditions([], Verdict("Complete", "", ""), NOW)
    assert _types(out) == [("SuccessCriteriaMet", "True"), ("Complete", "True")]
    # kube 1.33 (JobSuccessPolicy on) gives Complete the reason too; conformance waits for it
    assert out[0]["reason"] == out[1]["reason"] == "CompletionsReached"
    assert out[1]["message"] == "Reached expected number of succeeded pods"
    assert out[0]["lastTransitionTime"] == NOW


def test_failed_follows_failure_target_with_the_same_reason() -> None:
    verdict = Verdict("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    out = finished_conditions([{"type": "Suspended", "status": "False"}], verdict, NOW)
    assert _types(out) == [("Suspended", "False"), ("FailureTarget", "True"), ("Failed", "True")]
    assert out[1]["reason"] == out[2]["reason"] == "BackoffLimitExceeded"


def test_an_interim_condition_already_set_is_not_repeated() -> None:
    earlier = [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached"}]
    out = finished_conditions(earlier, Verdict("Complete", "", ""), NOW)
    assert _types(out) == [("SuccessCriteriaMet", "True"), ("Complete", "True")]
