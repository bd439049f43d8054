"""The Job controller's decisions, pure: how many pods to start, when the job is done, and
how long to wait after failures.  `job_verdict` and `pods_wanted` see counts, not objects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_BACKOFF_LIMIT = 6
BACKOFF_BASE_S = 10.0  # kube's pod failure back-off: 10 s, 20 s, 40 s ... capped at 6 min
BACKOFF_CAP_S = 360.0


@dataclass(frozen=True)
class Counts:
    active: int
    succeeded: int
    failed: int


@dataclass(frozen=True)
class Verdict:
    """A finished job's condition type (Complete or Failed), reason and message."""

    type: str
    reason: str
    message: str


def spec_numbers(job: Mapping[str, Any]) -> tuple[int, int | None, int]:
    """(parallelism, completions or None, backoffLimit), defaulted as kube does."""
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    completions = spec.get("completions")
    limit = spec.get("backoffLimit")
    return (
        parallelism if isinstance(parallelism, int) and parallelism >= 0 else 1,
        completions if isinstance(completions, int) and completions >= 0 else None,
        limit if isinstance(limit, int) and limit >= 0 else DEFAULT_BACKOFF_LIMIT,
    )


def job_verdict(job: Mapping[str, Any], counts: Counts, active_for_s: float | None) -> Verdict | None:
    """Complete, Failed, or None (still running).  `active_for_s`: since status.startTime.
    A FailureTarget already set (a pod matched a FailJob rule of the podFailurePolicy) fails it."""
    for c in (job.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "FailureTarget" and c.get("status") == "True":
            return Verdict("Failed", str(c.get("reason") or ""), str(c.get("message") or ""))
    _parallelism, completions, limit = spec_numbers(job)
    if counts.failed > limit:
        return Verdict("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
    if isinstance(deadline, int) and active_for_s is not None and active_for_s >= deadline:
        return Verdict("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
    if completions is not None:
        if counts.succeeded >= completions:
            return Verdict("Complete", "", "")
    elif counts.succeeded > 0 and counts.active == 0:
        return Verdict("Complete", "", "")  # a work queue: one success and nothing running
    return None


def pods_wanted(job: Mapping[str, Any], counts: Counts) -> int:
    """How many pods should be active now."""
    parallelism, completions, _ = spec_numbers(job)
    if (job.get("spec") or {}).get("suspend") is True:
        return 0
    if completions is None:
        return 0 if counts.succeeded > 0 else parallelism
    return max(0, min(parallelism, completions - counts.succeeded))


def failure_backoff(failures: int, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_CAP_S) -> float:
    """Seconds to wait before starting pods again after `failures` failed ones."""
    if failures <= 0:
        return 0.0
    return float(min(cap, base * 2.0 ** (failures - 1)))


INTERIM = {"Complete": "SuccessCriteriaMet", "Failed": "FailureTarget"}
"""The condition kube (1.31+) sets before a job's final one: kube-apiserver 1.33 refuses a
status with Complete=True and no SuccessCriteriaMet=True ("cannot set Complete=True condition
without the SuccessCriteriaMet=true condition"), and Failed=True without FailureTarget=True."""
COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")


def finished_conditions(existing: list[Any], verdict: Verdict, now: str) -> list[Any]:
    """`existing` with the verdict's interim condition (unless already there) and its final one,
    in kube's order.  Both carry the verdict's reason and message, CompletionsReached for a
    success without one: kube 1.33's newSuccessCondition (JobSuccessPolicy is on) says so on
    Complete too, and conformance waits for Complete with that reason."""

    def condition(kind: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": "True",
            "lastProbeTime": now,
            "lastTransitionTime": now,
            **({"reason": reason, "message": message} if reason else {}),
        }

    interim = INTERIM[verdict.type]
    out = list(existing)
    reason, message = (verdict.reason, verdict.message) if verdict.reason else COMPLETIONS_REACHED
    if not any(isinstance(c, dict) and c.get("type") == interim and c.get("status") == "True" for c in out):
        out.append(condition(interim, reason, message))
    out.append(condition(verdict.type, reason, message))
    return out
