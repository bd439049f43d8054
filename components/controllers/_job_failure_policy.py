"""A Job's `podFailurePolicy`: what a failed pod means, decided by the first rule it matches
(kube's matchPodFailurePolicy).

A rule matches on exit codes (`onExitCodes`: a container of the pod, or the one named, that
terminated with a code `In` the values, or `NotIn` them and not 0) or on pod conditions
(`onPodConditions`: the pod has a condition of that type with that status).  Its action:
`FailJob` fails the job at once (reason PodFailurePolicy, kube's message naming the
container, the code and the rule), `Ignore` does not count the failure against the
backoffLimit, `Count` counts it as any failure.  `FailIndex` needs Indexed jobs, which this
controller does not run: such a failure counts.  No rule matching: it counts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

FAIL_JOB, IGNORE, COUNT = "FailJob", "Ignore", "Count"
REASON = "PodFailurePolicy"


@dataclass(frozen=True, slots=True)
class Match:
    action: str
    message: str


def _terminated(pod: Mapping[str, Any]) -> Iterator[tuple[str, int]]:
    """(container, exit code) of each container of the pod that has terminated."""
    st = pod.get("status") or {}
    for kind in ("initContainerStatuses", "containerStatuses"):
        for c in st.get(kind) or ():
            if not isinstance(c, dict):
                continue
            code = ((c.get("state") or {}).get("terminated") or {}).get("exitCode")
            if isinstance(code, int) and not isinstance(code, bool):
                yield str(c.get("name") or ""), code


def _exit_code_match(rule: Mapping[str, Any], pod: Mapping[str, Any]) -> tuple[str, int] | None:
    on = rule.get("onExitCodes")
    if not isinstance(on, dict):
        return None
    values = {v for v in on.get("values") or () if isinstance(v, int)}
    wanted, operator = on.get("containerName"), on.get("operator")
    for name, code in _terminated(pod):
        if wanted and name != wanted:
            continue
        if (operator == "In" and code in values) or (operator == "NotIn" and code != 0 and code not in values):
            return name, code
    return None


def _condition_match(rule: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
    held = {
        (c.get("type"), c.get("status"))
        for c in (pod.get("status") or {}).get("conditions") or ()
        if isinstance(c, dict)
    }
    for want in rule.get("onPodConditions") or ():
        if isinstance(want, dict) and (want.get("type"), want.get("status") or "True") in held:
            return str(want.get("type"))
    return None


def match(job: Mapping[str, Any], pod: Mapping[str, Any]) -> Match | None:
    """What the job's policy says of its failed `pod`; None: no policy, or no rule matches."""
    policy = (job.get("spec") or {}).get("podFailurePolicy")
    if not isinstance(policy, dict):
        return None
    meta = pod.get("metadata") or {}
    who = f"{meta.get('namespace')}/{meta.get('name')}"
    for index, rule in enumerate(policy.get("rules") or ()):
        if not isinstance(rule, dict):
            continue
        action = str(rule.get("action") or "")
        by_code = _exit_code_match(rule, pod)
        if by_code is not None:
            name, code = by_code
            said = (
                f"Container {name} for pod {who} failed with exit code {code} matching {action} rule at index {index}"
            )
            return Match(action, said)
        condition = _condition_match(rule, pod)
        if condition is not None:
            return Match(action, f"Pod {who} has condition {condition} matching {action} rule at index {index}")
    return None
