"""Indexed Jobs, pure: completion indexes as kube writes them, the index a pod runs, the pod
of an index, and when an indexed job is done.

`completedIndexes` and `failedIndexes` are kube's compressed lists (`"0,2-4,7"`).  They are
kept as sorted, merged intervals and never expanded, so a job of 100,000 completions costs
a few intervals, and a hostile status string is parsed within its own length.

A pod of index i carries the index in the `batch.kubernetes.io/job-completion-index`
annotation and label, is called `<job>-<i>-<random>`, has hostname `<job>-<i>`, and every
container gets `JOB_COMPLETION_INDEX` from the annotation (downward API).  With
`backoffLimitPerIndex`, `batch.kubernetes.io/job-index-failure-count` says how often the index
failed before; an index failing more than that is a failed index.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from machinery.objects import Obj

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
ENV_NAME = "JOB_COMPLETION_INDEX"
FAIL_INDEX = "FailIndex"


@dataclass(frozen=True)
class Intervals:
    """Sorted, disjoint, non-adjacent inclusive intervals of indexes."""

    spans: tuple[tuple[int, int], ...] = ()

    @classmethod
    def parse(cls, text: Any, limit: int) -> Intervals:
        """kube's list, indexes at or past `limit` dropped; anything malformed reads as empty."""
        if not isinstance(text, str) or not text:
            return cls()
        out = cls()
        for part in text.split(","):
            lo, sep, hi = part.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()):
                return cls()
            first, last = int(lo), int(hi) if sep else int(lo)
            if first > last or first >= limit:
                continue
            out = out.with_span(first, min(last, limit - 1))
        return out

    def with_span(self, first: int, last: int) -> Intervals:
        spans = list(self.spans)
        at = bisect.bisect_left(spans, (first, first))
        spans.insert(at, (first, last))
        merged: list[tuple[int, int]] = []
        for lo, hi in spans:
            if merged and lo <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        return Intervals(tuple(merged))

    def with_index(self, index: int) -> Intervals:
        return self if index in self else self.with_span(index, index)

    def __contains__(self, index: object) -> bool:
        if not isinstance(index, int):
            return False
        at = bisect.bisect_right(self.spans, (index, float("inf"))) - 1
        return at >= 0 and self.spans[at][0] <= index <= self.spans[at][1]

    def total(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.spans)

    def __str__(self) -> str:
        return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.spans)


def overlap(a: Intervals, b: Intervals) -> int:
    """How many indexes both hold (a walk over both interval lists)."""
    total, i, j = 0, 0, 0
    while i < len(a.spans) and j < len(b.spans):
        lo = max(a.spans[i][0], b.spans[j][0])
        hi = min(a.spans[i][1], b.spans[j][1])
        if lo <= hi:
            total += hi - lo + 1
        if a.spans[i][1] < b.spans[j][1]:
            i += 1
        else:
            j += 1
    return total


def missing(limit: int, taken: list[Intervals], count: int) -> Iterator[int]:
    """Up to `count` indexes in [0, limit) none of `taken` holds, lowest first (the gaps are
    walked, not the indexes)."""
    merged = Intervals()
    for spans in taken:
        for lo, hi in spans.spans:
            merged = merged.with_span(lo, hi)
    given, cursor = 0, 0
    for lo, hi in (*merged.spans, (limit, limit)):
        while cursor < min(lo, limit) and given < count:
            yield cursor
            cursor += 1
            given += 1
        if given >= count or cursor >= limit:
            return
        cursor = max(cursor, hi + 1)


def is_indexed(job: Mapping[str, Any]) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def index_of(pod: Mapping[str, Any]) -> int | None:
    """The completion index a pod runs (annotation, else label), None when it has none."""
    meta = pod.get("metadata") or {}
    for source in (meta.get("annotations") or {}, meta.get("labels") or {}):
        value = source.get(COMPLETION_INDEX)
        if isinstance(value, str) and value.isdigit() and len(value) < 10:
            return int(value)
    return None


def failure_count(pod: Mapping[str, Any]) -> int:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(FAILURE_COUNT)
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) < 10 else 0


def with_index(pod: Obj, job_name: str, index: int, failures: int | None) -> Obj:
    """The job's pod made the pod of `index` (changed in place and returned)."""
    meta = pod.setdefault("metadata", {})
    meta["generateName"] = f"{job_name}-{index}-"
    meta["annotations"] = {**(meta.get("annotations") or {}), COMPLETION_INDEX: str(index)}
    if failures is not None:
        meta["annotations"][FAILURE_COUNT] = str(failures)
    meta["labels"] = {**(meta.get("labels") or {}), COMPLETION_INDEX: str(index)}
    spec = pod.setdefault("spec", {})
    spec["hostname"] = f"{job_name}-{index}"
    env = {"name": ENV_NAME, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
    for member in ("containers", "initContainers"):
        for container in spec.get(member) or ():
            if isinstance(container, dict) and not any(
                isinstance(e, dict) and e.get("name") == ENV_NAME for e in container.get("env") or ()
            ):
                container["env"] = [*(container.get("env") or []), copy.deepcopy(env)]
    return pod


@dataclass(frozen=True)
class IndexVerdict:
    type: str  # Complete or Failed
    reason: str
    message: str


def success_rule(job: Mapping[str, Any], completed: Intervals, completions: int) -> int | None:
    """The index of the first successPolicy rule the completed indexes meet, if any."""
    policy = (job.get("spec") or {}).get("successPolicy")
    rules = policy.get("rules") if isinstance(policy, dict) else None
    for number, rule in enumerate(rules or ()):
        if not isinstance(rule, dict):
            continue
        wanted = Intervals.parse(rule.get("succeededIndexes"), completions) if "succeededIndexes" in rule else None
        count = rule.get("succeededCount")
        if wanted is not None:
            hit = overlap(wanted, completed)
            if hit < wanted.total() or (isinstance(count, int) and hit < count):
                continue
            return number
        if isinstance(count, int) and completed.total() >= count:
            return number
    return None


def indexed_verdict(job: Mapping[str, Any], completed: Intervals, failed: Intervals) -> IndexVerdict | None:
    """An indexed job's end, before the count-based rules: its success policy met, too many
    failed indexes, or every index done with some failed."""
    spec = job.get("spec") or {}
    found = spec.get("completions")
    completions = found if isinstance(found, int) else 0
    rule = success_rule(job, completed, completions)
    if rule is not None:
        return IndexVerdict("Complete", "SuccessPolicy", f"Matched rules at index {rule}")
    most = spec.get("maxFailedIndexes")
    if isinstance(most, int) and failed.total() > most:
        return IndexVerdict(
            "Failed", "MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of failed indexes"
        )
    if failed.total() and completed.total() + failed.total() >= completions:
        return IndexVerdict("Failed", "FailedIndexes", "Job has failed indexes")
    return None
