"""The CronJob controller: a Job at each scheduled time, within the job's concurrency policy.

For each CronJob (keys `namespace/name`): the latest scheduled time not yet run (after
`status.lastScheduleTime`, else the CronJob's creation) is due when it is not older than
`startingDeadlineSeconds`.  `Allow` starts it beside running jobs, `Forbid` skips it while
one runs, `Replace` deletes the running ones first.  The Job is named
`<cronjob>-<scheduled time in minutes since the epoch>` (kube's name), so a second try at the
same time finds it (AlreadyExists) instead of starting it twice.  Finished jobs beyond
`successfulJobsHistoryLimit` (3) and `failedJobsHistoryLimit` (1) are deleted, oldest first.
The key is looked at again at the next scheduled time.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from datetime import UTC, datetime
from typing import Any

from components.client.events import NORMAL, reference
from components.client.indexer import OWNER_UID_INDEX
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import AlreadyExistsError, NotFoundError
from components.controllers.base import Controller, Requeue
from components.controllers.job import JOBS
from machinery.cron import CronError, parse
from machinery.objects import Obj

log = logging.getLogger("raftkube.controllers")
CRONJOBS = Resource("batch", "v1", "cronjobs", kind="CronJob")
SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MISSED_LIMIT = 100  # kube gives up counting missed times past this many


def _rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(ts: Any) -> datetime | None:
    if not isinstance(ts, str):
        return None
    try:
        return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _finished(job: Obj) -> str:
    """ "Complete", "Failed" or "" (still running)."""
    for c in (job.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return ""


class CronJobController(Controller):
    name = "cronjob"

    @staticmethod
    def wall() -> float:
        """Now, in seconds since the epoch (tests move it)."""
        return time.time()

    def setup(self) -> None:
        self.cronjobs = self.factory.informer(CRONJOBS)
        self.jobs = self.factory.informer(JOBS)
        self._uid_to_key: dict[str, str] = {}
        self.cronjobs.add_handler(EventHandler(on_add=self._seen, on_update=lambda _o, n: self._seen(n)))
        job_events = EventHandler(self._job_changed, lambda _o, n: self._job_changed(n), self._job_changed)
        self.jobs.add_handler(job_events)

    def _seen(self, cronjob: Obj) -> None:
        meta = cronjob.get("metadata") or {}
        if isinstance(meta.get("uid"), str):
            self._uid_to_key[meta["uid"]] = f"{meta.get('namespace')}/{meta.get('name')}"
        self.enqueue(cronjob)

    def _job_changed(self, job: Obj) -> None:
        for ref in (job.get("metadata") or {}).get("ownerReferences") or ():
            if isinstance(ref, dict) and ref.get("kind") == "CronJob" and ref.get("controller") is True:
                key = self._uid_to_key.get(str(ref.get("uid")))
                if key is not None:
                    self.queue.add(key)

    async def reconcile(self, key: str) -> None:
        cronjob = self.cronjobs.indexer.get(key)
        if cronjob is None:
            return
        meta, spec = cronjob["metadata"], cronjob.get("spec") or {}
        status: Obj = copy.deepcopy(cronjob.get("status") or {})
        jobs = [j for j in self.jobs.indexer.by_index(OWNER_UID_INDEX, meta["uid"]) if j["metadata"].get("namespace")]
        running = [j for j in jobs if not _finished(j) and not j["metadata"].get("deletionTimestamp")]
        await self._trim_history(spec, jobs)
        self._sync_status(status, running, jobs)
        try:
            schedule = parse(str(spec.get("schedule") or ""), spec.get("timeZone"))
        except CronError as e:
            log.warning("cronjob %s: unusable schedule: %s", key, e)
            await self._write_status(cronjob, status)
            return
        now = datetime.fromtimestamp(self.wall(), UTC)
        since = _parse_time(status.get("lastScheduleTime")) or _parse_time(meta.get("creationTimestamp")) or now
        due, missed, upcoming = None, 0, schedule.next_after(since)
        while upcoming is not None and upcoming <= now and missed < MISSED_LIMIT:
            due, missed = upcoming, missed + 1
            upcoming = schedule.next_after(upcoming)
        if due is not None and spec.get("suspend") is not True:
            deadline = spec.get("startingDeadlineSeconds")
            late = isinstance(deadline, int) and (now - due).total_seconds() > deadline
            if not late and await self._start(cronjob, due, running):
                status["lastScheduleTime"] = _rfc3339(due)
            elif late:
                status["lastScheduleTime"] = _rfc3339(due)  # missed its window: wait for the next one
        await self._write_status(cronjob, status)
        if upcoming is not None:
            raise Requeue(max(0.05, (upcoming - now).total_seconds()))

    async def _start(self, cronjob: Obj, due: datetime, running: list[Obj]) -> bool:
        """Start the job for `due` as the concurrency policy allows; whether the time is used."""
        policy = (cronjob.get("spec") or {}).get("concurrencyPolicy") or "Allow"
        ns = cronjob["metadata"]["namespace"]
        if running and policy == "Forbid":
            return True  # skipped: kube counts the time as handled
        if running and policy == "Replace":
            for j in running:
                with contextlib.suppress(NotFoundError):
                    await self.client.delete(JOBS.path(ns, j["metadata"]["name"]), {"propagationPolicy": "Background"})
        with contextlib.suppress(AlreadyExistsError):  # started at this time already
            made = await self.client.create(JOBS.path(ns), self._job_for(cronjob, due))
            said = f"Created job {made['metadata']['name']}"
            self.events.record(reference(cronjob, "batch/v1", "CronJob"), NORMAL, "SuccessfulCreate", said)
        return True

    def _job_for(self, cronjob: Obj, due: datetime) -> Obj:
        template = copy.deepcopy((cronjob.get("spec") or {}).get("jobTemplate") or {})
        meta = template.setdefault("metadata", {})
        name = cronjob["metadata"]["name"]
        meta["name"] = f"{name}-{int(due.timestamp()) // 60}"
        meta["annotations"] = {**(meta.get("annotations") or {}), SCHEDULED_ANNOTATION: _rfc3339(due)}
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": name,
                "uid": cronjob["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        return {"apiVersion": "batch/v1", "kind": "Job", **template}

    def _sync_status(self, status: Obj, running: list[Obj], jobs: list[Obj]) -> None:
        status["active"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "namespace": j["metadata"]["namespace"],
                "name": j["metadata"]["name"],
                "uid": j["metadata"]["uid"],
                "resourceVersion": j["metadata"].get("resourceVersion", ""),
            }
            for j in sorted(running, key=lambda j: j["metadata"]["name"])
        ] or None
        if status["active"] is None:
            del status["active"]
        done = [j for j in jobs if _finished(j) == "Complete" and (j.get("status") or {}).get("completionTime")]
        if done:
            status["lastSuccessfulTime"] = max(str(j["status"]["completionTime"]) for j in done)

    async def _trim_history(self, spec: Obj, jobs: list[Obj]) -> None:
        for kind, field, default in (
            ("Complete", "successfulJobsHistoryLimit", 3),
            ("Failed", "failedJobsHistoryLimit", 1),
        ):
            limit = spec.get(field)
            keep = limit if isinstance(limit, int) and limit >= 0 else default
            finished = sorted(
                (j for j in jobs if _finished(j) == kind and not j["metadata"].get("deletionTimestamp")),
                key=lambda j: j["metadata"].get("creationTimestamp") or "",
            )
            for j in finished[: max(0, len(finished) - keep)]:
                try:
                    body = {"propagationPolicy": "Background"}
                    await self.client.delete(JOBS.path(j["metadata"]["namespace"], j["metadata"]["name"]), body)
                except NotFoundError:
                    pass

    async def _write_status(self, cronjob: Obj, status: Obj) -> None:
        if status == (cronjob.get("status") or {}):
            return
        ns, name = cronjob["metadata"]["namespace"], cronjob["metadata"]["name"]
        await self.client.replace(CRONJOBS.path(ns, name, "status"), {**cronjob, "status": status})
