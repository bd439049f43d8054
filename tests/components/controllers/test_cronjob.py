"""The CronJob controller (its schedules are `machinery.cron`'s, tested there) against a real
apiserver with the controller's clock moved to just past a minute boundary: the job fires
once per scheduled time, named as kube names it; Forbid skips while a job runs; history
limits delete the oldest finished jobs."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from components.client import kubeconfig
from components.client.rest import RestClient
from components.controllers.cronjob import CronJobController
from components.controllers.runner import running
from machinery.objects import Obj
from tests.apiserver.support import ApiserverUnderTest
from tests.support.wait import eventually


class ShiftedCronJobs(CronJobController):
    """Its clock runs `offset` seconds ahead (set by the test: just past a minute boundary)."""

    offset = 0.0

    @staticmethod
    def wall() -> float:
        return time.time() + ShiftedCronJobs.offset


def at(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


def cronjob(name: str, **spec: Any) -> Obj:
    pod = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    body = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": pod}}, **spec}
    return {"metadata": {"name": name}, "spec": body}


def test_a_cronjob_fires_once_per_scheduled_time(cluster: ApiserverUnderTest) -> None:
    ns = "cron-fires"

    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as c:
            await c.create("/api/v1/namespaces", {"metadata": {"name": ns}})
            base = f"/apis/batch/v1/namespaces/{ns}"
            made = await c.create(f"{base}/cronjobs", cronjob("tick", concurrencyPolicy="Forbid"))
            created = datetime.strptime(made["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
            boundary = (created.replace(tzinfo=UTC).timestamp() // 60 + 1) * 60  # the first firing
            ShiftedCronJobs.offset = boundary + 1.0 - time.time()  # one second past it, now
            async with running(c, [ShiftedCronJobs]):

                async def one_job() -> bool:
                    return len((await c.get(f"{base}/jobs"))["items"]) == 1

                await eventually(one_job, what="a job at the scheduled time")
                await asyncio.sleep(1.0)  # requeues and status writes start nothing more
                jobs = (await c.get(f"{base}/jobs"))["items"]
                assert len(jobs) == 1
                expected = int(boundary // 60)
                assert jobs[0]["metadata"]["name"] == f"tick-{expected}"
                assert jobs[0]["metadata"]["ownerReferences"][0]["kind"] == "CronJob"

                async def status_shows_it() -> bool:
                    st = (await c.get(f"{base}/cronjobs/tick")).get("status") or {}
                    return bool(st.get("lastScheduleTime")) and len(st.get("active") or []) == 1

                await eventually(status_shows_it, what="lastScheduleTime and the active job in the status")

    asyncio.run(go())
