"""The Job controller: runs a job's pods until enough succeed, or too many fail.

Every pod it creates carries the finalizer `batch.kubernetes.io/job-tracking`, so a finished
pod cannot vanish before it is counted, and is counted once: its UID first goes into
`status.uncountedTerminatedPods` (one status write), then the finalizer is removed, then the
UIDs move into `succeeded`/`failed` (a second write) — kube's tracking with finalizers.
Creations are remembered (expectations) until the pod informer shows them, so the events of
our own writes never start a pod twice.  Pure decisions live in `_job_status`.
"""

from __future__ import annotations

import contextlib
import copy
import time
from datetime import UTC, datetime
from typing import Any

from components.client.events import NORMAL, WARNING, reference
from components.client.indexer import NAMESPACE_INDEX, OWNER_UID_INDEX, key_of, split_key
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import NotFoundError
from components.controllers import _job_failure_policy as failure_policy
from components.controllers import _job_indexes as indexes
from components.controllers._claim import claim_pods
from components.controllers._job_status import (
    BACKOFF_BASE_S,
    Counts,
    Verdict,
    failure_backoff,
    finished_conditions,
    job_verdict,
    pods_wanted,
    spec_numbers,
)
from components.controllers._workload_pods import owner_ref, selector_matches
from components.controllers.base import Controller, Requeue
from machinery.objects import Obj
from machinery.pods import is_ready

JOBS = Resource("batch", "v1", "jobs", kind="Job")
PODS = Resource("", "v1", "pods", kind="Pod")
TRACKING = "batch.kubernetes.io/job-tracking"
FINISHED = ("Succeeded", "Failed")
EXPECTATION_TIMEOUT_S = 300.0
ORPHAN_PREFIX = "pod:"


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(ts: Any) -> float | None:
    if not isinstance(ts, str):
        return None
    try:
        return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _controller_uid(obj: Obj, kind: str) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True and ref.get("kind") == kind:
            uid = ref.get("uid")
            return uid if isinstance(uid, str) else None
    return None


def _finished_condition(job: Obj) -> Obj | None:
    for c in (job.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return c
    return None


class JobController(Controller):
    name = "job"
    workers = 4
    backoff_base = BACKOFF_BASE_S  # tests shorten it

    def setup(self) -> None:
        self.jobs = self.factory.informer(JOBS)
        self.pods = self.factory.informer(PODS)
        self._uid_to_key: dict[str, str] = {}
        self._expected: dict[str, tuple[int, float]] = {}  # job key -> (creations not seen yet, until)
        self._last_failure: dict[str, float] = {}
        # pods whose tracking finalizer we removed while the informer still shows it: never
        # counted again (kube's finalizer expectations); forgotten once the informer catches up
        self._released: set[str] = set()
        self.jobs.add_handler(
            EventHandler(on_add=self._job_seen, on_update=lambda _o, n: self._job_seen(n), on_delete=self._job_gone)
        )
        self.pods.add_handler(
            EventHandler(
                on_add=self._pod_added, on_update=lambda _o, n: self._pod_changed(n), on_delete=self._pod_changed
            )
        )

    # -- handlers ----------------------------------------------------------------------------

    def _job_seen(self, job: Obj) -> None:
        uid = (job.get("metadata") or {}).get("uid")
        if isinstance(uid, str):
            self._uid_to_key[uid] = key_of(job)
        self.enqueue(job)

    def _job_gone(self, job: Obj) -> None:
        """A deleted job's pods still carrying its tracking finalizer are let go (kube's
        cleanupPodFinalizers): nothing else would change them, and a pod with a finalizer left
        keeps its namespace Terminating."""
        uid = (job.get("metadata") or {}).get("uid")
        if not isinstance(uid, str):
            return
        self._uid_to_key.pop(uid, None)
        for pod in self.pods.indexer.by_index(OWNER_UID_INDEX, uid):
            if _controller_uid(pod, "Job") == uid and TRACKING in ((pod.get("metadata") or {}).get("finalizers") or ()):
                self.queue.add(ORPHAN_PREFIX + key_of(pod))

    def _pod_added(self, pod: Obj) -> None:
        key = self._job_key_of(pod)
        if key is not None and key in self._expected:
            left, until = self._expected[key]
            if left <= 1:
                del self._expected[key]
            else:
                self._expected[key] = (left - 1, until)
        self._pod_changed(pod)

    def _pod_changed(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        if TRACKING not in (meta.get("finalizers") or ()):
            self._released.discard(str(meta.get("uid")))
        key = self._job_key_of(pod)
        if key is not None:
            self.queue.add(key)
            return
        if _controller_uid(pod, "Job") is None:  # an orphan: the jobs that would adopt it look at it
            adopters = self._matching_jobs(pod)
            for adopter in adopters:
                self.queue.add(adopter)
            if adopters:
                return
        if TRACKING in ((pod.get("metadata") or {}).get("finalizers") or ()):
            self.queue.add(ORPHAN_PREFIX + key_of(pod))  # its job is gone: let the pod go

    def _matching_jobs(self, pod: Obj) -> list[str]:
        """The keys of the jobs in the pod's namespace whose selector matches it (kube's getPodJobs)."""
        meta = pod.get("metadata") or {}
        found = meta.get("labels") or {}
        return [
            key_of(j)
            for j in self.jobs.indexer.by_index(NAMESPACE_INDEX, str(meta.get("namespace") or ""))
            if selector_matches((j.get("spec") or {}).get("selector"), found)
        ]

    def _job_key_of(self, pod: Obj) -> str | None:
        uid = _controller_uid(pod, "Job")
        if uid is None:
            return None
        key = self._uid_to_key.get(uid)
        return key if key is not None and self.jobs.indexer.get(key) is not None else None

    # -- reconcile ---------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        if key.startswith(ORPHAN_PREFIX):
            pod = self.pods.indexer.get(key[len(ORPHAN_PREFIX) :])
            if pod is not None and self._job_key_of(pod) is None and not self._matching_jobs(pod):
                await self._release(pod)
            return
        job = self.jobs.indexer.get(key)
        if job is None:
            self._expected.pop(key, None)
            self._last_failure.pop(key, None)
            return
        uid = job["metadata"]["uid"]
        pods = [p for p in self.pods.indexer.by_index(OWNER_UID_INDEX, uid) if _controller_uid(p, "Job") == uid]
        selector = (job.get("spec") or {}).get("selector")
        if isinstance(selector, dict) and selector:  # adopt orphans it matches, release what it no longer does
            candidates = self.pods.indexer.by_index(NAMESPACE_INDEX, job["metadata"]["namespace"])
            pods = await claim_pods(self.client, job, selector, candidates, self._owner_ref(job), lambda p: True)
        status: Obj = copy.deepcopy(job.get("status") or {})
        if await self._track_finished(key, job, pods, status):
            return
        active = [p for p in pods if _phase(p) not in FINISHED and not p["metadata"].get("deletionTimestamp")]
        counts = Counts(len(active), int(status.get("succeeded") or 0), int(status.get("failed") or 0))
        done = _finished_condition(job)
        if done is not None:
            await self._delete_pods(active)
            await self._expire(job, done)
            return
        if not status.get("startTime"):
            status["startTime"] = _now_rfc3339()
            if indexes.is_indexed(job):
                status.setdefault("completedIndexes", "")
                if (job.get("spec") or {}).get("backoffLimitPerIndex") is not None:
                    status.setdefault("failedIndexes", "")
            await self._write_status(job, status)
            return
        started = _parse(status.get("startTime"))
        verdict = job_verdict(job, counts, None if started is None else time.time() - started)
        if indexes.is_indexed(job) and (verdict is None or verdict.type == "Complete"):
            ended = indexes.indexed_verdict(job, *self._indexes(job, status))
            if ended is not None:
                verdict = Verdict(ended.type, ended.reason, ended.message)
        if verdict is not None:
            await self._delete_pods(active)
            await self._finish(job, status, verdict)
            return
        if indexes.is_indexed(job):
            await self._scale_indexed(key, job, active, pods, *self._indexes(job, status))
        else:
            await self._scale(key, job, active, counts)
        ready = sum(1 for p in active if is_ready(p))
        if status.get("active", 0) != len(active) or status.get("ready", 0) != ready:
            status["active"], status["ready"] = len(active), ready
            await self._write_status(job, status)
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        if isinstance(deadline, int) and started is not None:
            raise Requeue(max(0.1, started + deadline - time.time()))

    async def _track_finished(self, key: str, job: Obj, pods: list[Obj], status: Obj) -> bool:
        """Count finished pods exactly once; True when it wrote (the write's event continues)."""
        uncounted = status.get("uncountedTerminatedPods") or {}
        succeeded, failed = list(uncounted.get("succeeded") or []), list(uncounted.get("failed") or [])
        newly = [
            p
            for p in pods
            if _phase(p) in FINISHED
            and TRACKING in (p["metadata"].get("finalizers") or ())
            and p["metadata"]["uid"] not in succeeded + failed
            and p["metadata"]["uid"] not in self._released
        ]
        if newly:
            for p in newly:
                if _phase(p) == "Succeeded":
                    succeeded.append(p["metadata"]["uid"])
                    continue
                verdict = failure_policy.match(job, p)
                if verdict is not None and verdict.action == failure_policy.IGNORE:
                    await self._release(p)  # not counted against the backoffLimit
                    self._released.add(p["metadata"]["uid"])
                    continue
                failed.append(p["metadata"]["uid"])
                if verdict is not None and verdict.action == failure_policy.FAIL_JOB:
                    _fail_target(status, verdict.message)
            status["uncountedTerminatedPods"] = {"succeeded": succeeded, "failed": failed}
            await self._write_status(job, status)
            return True
        if not succeeded and not failed:
            return False
        by_uid = {p["metadata"]["uid"]: p for p in pods}
        for uid in succeeded + failed:
            pod = by_uid.get(uid)
            if pod is not None and TRACKING in (pod["metadata"].get("finalizers") or ()):
                await self._release(pod)
                self._released.add(uid)
        status["succeeded"] = int(status.get("succeeded") or 0) + len(succeeded)
        status["failed"] = int(status.get("failed") or 0) + len(failed)
        if indexes.is_indexed(job):
            self._count_indexes(
                job, status, [by_uid[u] for u in succeeded if u in by_uid], [by_uid[u] for u in failed if u in by_uid]
            )
        status["uncountedTerminatedPods"] = {}
        if failed:
            self._last_failure[key] = self.clock.now()
        await self._write_status(job, status)
        return True

    async def _scale(self, key: str, job: Obj, active: list[Obj], counts: Counts) -> None:
        expected = self._expected.get(key)
        if expected is not None:
            if self.clock.now() < expected[1]:
                return  # our last creations are not all seen yet
            del self._expected[key]
        wanted = pods_wanted(job, counts)
        if len(active) < wanted:
            if counts.failed:
                since = self.clock.now() - self._last_failure.get(key, float("-inf"))
                wait = failure_backoff(counts.failed, self.backoff_base) - since
                if wait > 0:
                    raise Requeue(wait)
            missing = wanted - len(active)
            self._expected[key] = (missing, self.clock.now() + EXPECTATION_TIMEOUT_S)
            for _ in range(missing):
                made = await self.client.create(PODS.path(job["metadata"]["namespace"]), self._pod_for(job))
                said = f"Created pod: {made['metadata']['name']}"
                self.events.record(reference(job, "batch/v1", "Job"), NORMAL, "SuccessfulCreate", said)
        elif len(active) > wanted:
            extra = sorted(active, key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True)
            await self._delete_pods(extra[: len(active) - wanted])

    # -- indexed jobs ------------------------------------------------------------------------

    @staticmethod
    def _indexes(job: Obj, status: Obj) -> tuple[indexes.Intervals, indexes.Intervals]:
        """(completed, failed) indexes from the status, within [0, completions)."""
        completions = (job.get("spec") or {}).get("completions")
        limit = completions if isinstance(completions, int) else 0
        return (
            indexes.Intervals.parse(status.get("completedIndexes"), limit),
            indexes.Intervals.parse(status.get("failedIndexes"), limit),
        )

    def _count_indexes(self, job: Obj, status: Obj, succeeded: list[Obj], failed: list[Obj]) -> None:
        """Counted pods into the index lists: a success completes its index; with
        backoffLimitPerIndex, a failure past the index's limit (or one matching a FailIndex rule)
        fails it.  An indexed job's `succeeded` is its completed indexes."""
        completed, failed_indexes = self._indexes(job, status)
        spec = job.get("spec") or {}
        found = spec.get("completions")
        completions = found if isinstance(found, int) else 0
        for pod in succeeded:
            index = indexes.index_of(pod)
            if index is not None and index < completions and index not in failed_indexes:
                completed = completed.with_index(index)
        per_index = spec.get("backoffLimitPerIndex")
        if isinstance(per_index, int):
            for pod in failed:
                index = indexes.index_of(pod)
                if index is None or index >= completions or index in completed:
                    continue
                verdict = failure_policy.match(job, pod)
                if (verdict is not None and verdict.action == indexes.FAIL_INDEX) or indexes.failure_count(
                    pod
                ) + 1 > per_index:
                    failed_indexes = failed_indexes.with_index(index)
            status["failedIndexes"] = str(failed_indexes)
        status["completedIndexes"] = str(completed)
        status["succeeded"] = completed.total()

    async def _scale_indexed(
        self,
        key: str,
        job: Obj,
        active: list[Obj],
        pods: list[Obj],
        completed: indexes.Intervals,
        failed: indexes.Intervals,
    ) -> None:
        """One active pod per pending index, up to parallelism, lowest indexes first; extra
        pods (a duplicate index, an index already done or out of range) are deleted.  A failed
        index waits out its own back-off (from its last pod's failure) before it runs again."""
        spec = job.get("spec") or {}
        parallelism, completions, _ = spec_numbers(job)
        limit = completions or 0
        keep: dict[int, Obj] = {}
        extra: list[Obj] = []
        for pod in sorted(active, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
            index = indexes.index_of(pod)
            if index is None or index >= limit or index in completed or index in failed or index in keep:
                extra.append(pod)
            else:
                keep[index] = pod
        if extra:
            await self._delete_pods(extra)
        expected = self._expected.get(key)
        if expected is not None:
            if self.clock.now() < expected[1]:
                return
            del self._expected[key]
        per_index = isinstance(spec.get("backoffLimitPerIndex"), int)
        failures_so_far = int((job.get("status") or {}).get("failed") or 0)
        if not per_index and failures_so_far:
            # without per-index limits a failure delays every new pod, as for a NonIndexed job
            since = self.clock.now() - self._last_failure.get(key, float("-inf"))
            wait = failure_backoff(failures_so_far, self.backoff_base) - since
            if wait > 0:
                raise Requeue(wait)
        suspended = spec.get("suspend") is True
        room = 0 if suspended else min(parallelism, limit - completed.total() - failed.total()) - len(keep)
        if room < 0:
            surplus = sorted(keep.items(), reverse=True)[:-room]
            await self._delete_pods([p for _, p in surplus])
            return
        running = indexes.Intervals()
        for index in keep:
            running = running.with_index(index)
        failures = self._index_failures(pods)
        now, waits = time.time(), []
        chosen: list[int] = []
        for index in indexes.missing(limit, [completed, failed, running], limit):
            if len(chosen) >= room:
                break
            count, last = failures.get(index, (0, None))
            if count and last is not None:
                ready_at = last + failure_backoff(count, self.backoff_base)
                if ready_at > now:
                    waits.append(ready_at - now)
                    continue
            chosen.append(index)
        if chosen:
            self._expected[key] = (len(chosen), self.clock.now() + EXPECTATION_TIMEOUT_S)
            for index in chosen:
                pod = indexes.with_index(
                    self._pod_for(job),
                    job["metadata"]["name"],
                    index,
                    failures.get(index, (0, None))[0] if per_index else None,
                )
                made = await self.client.create(PODS.path(job["metadata"]["namespace"]), pod)
                said = f"Created pod: {made['metadata']['name']}"
                self.events.record(reference(job, "batch/v1", "Job"), NORMAL, "SuccessfulCreate", said)
        if waits:
            raise Requeue(min(waits) + 0.05)

    @staticmethod
    def _index_failures(pods: list[Obj]) -> dict[int, tuple[int, float | None]]:
        """Per index: how often it failed (its last failed pod's count, plus one) and when."""
        out: dict[int, tuple[int, float | None]] = {}
        for pod in pods:
            if _phase(pod) != "Failed":
                continue
            index = indexes.index_of(pod)
            if index is None:
                continue
            count = indexes.failure_count(pod) + 1
            when = _finished_at(pod)
            seen = out.get(index)
            if seen is None or count > seen[0]:
                out[index] = (count, when)
        return out

    def _pod_for(self, job: Obj) -> Obj:
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        meta = template.setdefault("metadata", {})
        meta["generateName"] = f"{job['metadata']['name']}-"
        meta.pop("name", None)
        meta["finalizers"] = [*(meta.get("finalizers") or []), TRACKING]
        meta["ownerReferences"] = [self._owner_ref(job)]
        return {"apiVersion": "v1", "kind": "Pod", **template}

    @staticmethod
    def _owner_ref(job: Obj) -> Obj:
        return owner_ref(job, "Job", "batch/v1")

    async def _finish(self, job: Obj, status: Obj, verdict: Verdict) -> None:
        now = _now_rfc3339()
        status["conditions"] = finished_conditions(status.get("conditions") or [], verdict, now)
        status["active"], status["ready"] = 0, 0
        if verdict.type == "Complete":
            status["completionTime"] = now
        await self._write_status(job, status)
        # kube's words: "Completed"/"Job completed", else the failure's reason and message
        if verdict.type == "Complete":
            self.events.record(reference(job, "batch/v1", "Job"), NORMAL, "Completed", "Job completed")
        else:
            self.events.record(reference(job, "batch/v1", "Job"), WARNING, verdict.reason, verdict.message)

    async def _expire(self, job: Obj, done: Obj) -> None:
        """ttlSecondsAfterFinished: the job (and, through the GC, its pods) goes after it."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        finished = _parse(done.get("lastTransitionTime"))
        if not isinstance(ttl, int) or finished is None:
            return
        left = finished + ttl - time.time()
        if left > 0:
            raise Requeue(left)
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        body = {"propagationPolicy": "Background", "preconditions": {"uid": job["metadata"]["uid"]}}
        with contextlib.suppress(NotFoundError):
            await self.client.delete(JOBS.path(ns, name), body)

    async def _delete_pods(self, pods: list[Obj]) -> None:
        for p in pods:
            with contextlib.suppress(NotFoundError):
                await self.client.delete(PODS.path(p["metadata"]["namespace"], p["metadata"]["name"]))

    async def _release(self, pod: Obj) -> None:
        """Remove the tracking finalizer (at the pod's resourceVersion: a conflict retries)."""
        meta = pod["metadata"]
        remaining = [f for f in meta.get("finalizers") or () if f != TRACKING]
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            {"op": "replace", "path": "/metadata/finalizers", "value": remaining},
        ]
        with contextlib.suppress(NotFoundError):
            await self.client.patch(PODS.path(meta["namespace"], meta["name"]), patch, "json")

    async def _write_status(self, job: Obj, status: Obj) -> None:
        ns, name = split_key(key_of(job))
        body = {**job, "status": status}
        await self.client.replace(JOBS.path(ns, name, "status"), body)


def _fail_target(status: Obj, message: str) -> None:
    """kube's FailureTarget for a FailJob rule (the first one that matched stays)."""
    conditions = status.setdefault("conditions", [])
    if any(isinstance(c, dict) and c.get("type") == "FailureTarget" for c in conditions):
        return
    now = _now_rfc3339()
    conditions.append(
        {
            "type": "FailureTarget",
            "status": "True",
            "reason": failure_policy.REASON,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
    )


def _finished_at(pod: Obj) -> float | None:
    """When the pod's last container ended (a failed index's back-off counts from it)."""
    ends = [
        _parse(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for c in (pod.get("status") or {}).get("containerStatuses") or ()
        if isinstance(c, dict)
    ]
    found = [e for e in ends if e is not None]
    return max(found) if found else _parse((pod.get("metadata") or {}).get("creationTimestamp"))


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")
