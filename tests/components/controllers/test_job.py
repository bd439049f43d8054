"""The Job controller against a real apiserver, with the test playing kubelet (it sets pods'
phases): completions and parallelism, a failing pod stops at backoffLimit, every finished pod
is counted once (tracking finalizers), activeDeadlineSeconds, ttlSecondsAfterFinished; and
the pure decisions."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from components.client import kubeconfig
from components.client.rest import NotFoundError, RestClient
from components.controllers._job_status import Counts, failure_backoff, job_verdict, pods_wanted
from components.controllers.job import TRACKING, JobController
from components.controllers.runner import running
from machinery.objects import Obj
from tests.apiserver.support import ApiserverUnderTest
from tests.support.wait import eventually


class FastJobs(JobController):
    backoff_base = 0.2


def job(name: str, **spec: Any) -> Obj:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    return {"metadata": {"name": name}, "spec": {"template": template, **spec}}


async def pods_of(c: RestClient, ns: str, name: str) -> list[Obj]:
    items = await c.get(f"/api/v1/namespaces/{ns}/pods", {"labelSelector": f"batch.kubernetes.io/job-name={name}"})
    return list(items["items"])


async def finish(c: RestClient, pod: Obj, phase: str) -> None:
    meta = pod["metadata"]
    await c.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", {"status": {"phase": phase}})


def scenario(cluster: ApiserverUnderTest, ns: str, body: Callable[[RestClient, str], Awaitable[None]]) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            await client.create("/api/v1/namespaces", {"metadata": {"name": ns}})
            async with running(client, [FastJobs]):
                await body(client, ns)

    asyncio.run(go())


def condition(j: Obj) -> tuple[str, str] | None:
    """The final condition (the interim SuccessCriteriaMet/FailureTarget kube sets first aside)."""
    for c in (j.get("status") or {}).get("conditions") or []:
        if c["status"] == "True" and c["type"] in ("Complete", "Failed"):
            return c["type"], c.get("reason", "")
    return None


def test_completions_and_parallelism(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        await c.create(path, job("work", completions=3, parallelism=2))

        async def unfinished(n: int) -> bool:
            pods = await pods_of(c, ns, "work")
            return len([p for p in pods if (p.get("status") or {}).get("phase") != "Succeeded"]) == n

        for want in (2, 2, 1):  # 3 completions, 2 at a time
            await eventually(lambda want=want: unfinished(want), what=f"{want} active pods")
            active = [p for p in await pods_of(c, ns, "work") if p["status"].get("phase") != "Succeeded"]
            assert all(TRACKING in p["metadata"]["finalizers"] for p in active)
            await finish(c, active[0], "Succeeded")
            await asyncio.sleep(0.3)

        async def complete() -> bool:
            return condition(await c.get(f"{path}/work")) == ("Complete", "CompletionsReached")

        await eventually(complete, what="Complete")
        done = await c.get(f"{path}/work")
        assert done["status"]["succeeded"] == 3 and done["status"].get("failed", 0) == 0
        assert done["status"]["completionTime"]
        pods = await pods_of(c, ns, "work")
        assert len(pods) == 3 and all(TRACKING not in (p["metadata"].get("finalizers") or []) for p in pods)

    scenario(cluster, "job-complete", body)


def test_a_deleted_jobs_running_pods_lose_its_tracking_finalizer(cluster: ApiserverUnderTest) -> None:
    """Kube's cleanupPodFinalizers: a job deleted while its pods run lets them go at once; they
    would otherwise keep the finalizer, and their namespace Terminating, for good (conformance's
    Job specs left namespaces so)."""

    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        await c.create(path, job("gone", parallelism=2, completions=2))

        async def tracked() -> bool:
            pods = await pods_of(c, ns, "gone")
            return len(pods) == 2 and all(TRACKING in p["metadata"]["finalizers"] for p in pods)

        await eventually(tracked, what="two tracked pods")
        await c.delete(f"{path}/gone")  # background: no garbage collector runs here to take the pods

        async def released() -> bool:
            pods = await pods_of(c, ns, "gone")
            return len(pods) == 2 and all(TRACKING not in (p["metadata"].get("finalizers") or []) for p in pods)

        await eventually(released, what="the pods let go")

    scenario(cluster, "job-deleted", body)


def test_a_failing_pod_stops_at_the_backoff_limit_counted_once(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        await c.create(path, job("fails", backoffLimit=2))
        failed_uids: set[str] = set()

        async def fail_the_active_one() -> bool:
            j = await c.get(f"{path}/fails")
            if condition(j) is not None:
                return True
            for p in await pods_of(c, ns, "fails"):
                if p["metadata"]["uid"] not in failed_uids and (p.get("status") or {}).get("phase") != "Failed":
                    failed_uids.add(p["metadata"]["uid"])
                    await finish(c, p, "Failed")
            return False

        await eventually(fail_the_active_one, what="the job failed")
        j = await c.get(f"{path}/fails")
        assert condition(j) == ("Failed", "BackoffLimitExceeded")
        assert j["status"]["failed"] == 3 == len(failed_uids)  # backoffLimit 2: the third failure ends it
        await asyncio.sleep(1.0)  # no pod is counted twice, no new pod starts
        j = await c.get(f"{path}/fails")
        assert j["status"]["failed"] == 3 and len(await pods_of(c, ns, "fails")) == 3

    scenario(cluster, "job-fails", body)


def test_the_deadline_fails_the_job_and_kills_its_pods(cluster: ApiserverUnderTest) -> None:
    """No TTL here, so nothing races the checks: at activeDeadlineSeconds (not before) the job
    gets Failed/DeadlineExceeded, counts no active pod, and every pod it ran is being deleted."""

    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        await c.create(path, job("late", parallelism=2, completions=4, activeDeadlineSeconds=2))

        async def two_running() -> bool:
            return len(await pods_of(c, ns, "late")) == 2

        await eventually(two_running, what="2 pods started")
        for p in await pods_of(c, ns, "late"):
            await finish(c, p, "Running")

        async def deadline_exceeded() -> bool:
            return condition(await c.get(f"{path}/late")) == ("Failed", "DeadlineExceeded")

        await eventually(deadline_exceeded, what="Failed/DeadlineExceeded")
        j = await c.get(f"{path}/late")
        [cond] = [x for x in j["status"]["conditions"] if x["type"] == "Failed"]
        assert cond["message"] == "Job was active longer than specified deadline"
        started, failed_at = (_seconds(t) for t in (j["status"]["startTime"], cond["lastTransitionTime"]))
        # at the deadline: not before, and not only at some later resync (the slack is for a loaded machine)
        assert started + 2 <= failed_at <= started + 2 + 15, (j["status"]["startTime"], cond["lastTransitionTime"])
        assert j["status"].get("active", 0) == 0

        async def killed() -> bool:
            return all(p["metadata"].get("deletionTimestamp") for p in await pods_of(c, ns, "late"))

        await eventually(killed, what="the job's pods deleted")

    scenario(cluster, "job-deadline-kills", body)


def _seconds(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def test_deadline_and_ttl(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        await c.create(path, job("slow", activeDeadlineSeconds=2, ttlSecondsAfterFinished=1))

        async def deadline_exceeded() -> bool:
            try:
                return condition(await c.get(f"{path}/slow")) == ("Failed", "DeadlineExceeded")
            except NotFoundError:
                return True  # already collected by its TTL

        await eventually(deadline_exceeded, what="DeadlineExceeded")

        async def collected() -> bool:
            try:
                await c.get(f"{path}/slow")
                return False
            except NotFoundError:
                return True

        await eventually(collected, what="the job deleted after its TTL")

    scenario(cluster, "job-deadline", body)


def test_pure_decisions() -> None:
    j = {"spec": {"completions": 3, "parallelism": 2, "backoffLimit": 1}}
    assert pods_wanted(j, Counts(0, 0, 0)) == 2 and pods_wanted(j, Counts(1, 2, 0)) == 1
    assert job_verdict(j, Counts(0, 3, 0), 1.0) is not None
    failed = job_verdict(j, Counts(1, 0, 2), 1.0)
    assert failed is not None and failed.reason == "BackoffLimitExceeded"
    queue = {"spec": {"parallelism": 2}}
    assert pods_wanted(queue, Counts(0, 0, 0)) == 2 and pods_wanted(queue, Counts(1, 1, 0)) == 0
    assert job_verdict(queue, Counts(1, 1, 0), 1.0) is None and job_verdict(queue, Counts(0, 1, 0), 1.0) is not None
    assert [failure_backoff(n, 10) for n in (0, 1, 2, 3, 10)] == [0, 10, 20, 40, 360]


async def fail_with(c: RestClient, pod: Obj, code: int) -> None:
    """The pod failed, its container with `code` (what a kubelet reports)."""
    meta = pod["metadata"]
    terminated = {"exitCode": code, "reason": "Error"}
    statuses = [{"name": "c", "image": "busybox", "ready": False, "restartCount": 0}]
    statuses[0]["state"] = {"terminated": terminated}
    body = {"status": {"phase": "Failed", "containerStatuses": statuses}}
    await c.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", body)


def test_a_pod_failure_policy_ignores_one_code_and_fails_the_job_on_another(cluster: ApiserverUnderTest) -> None:
    """Conformance "should allow to use the pod failure policy on exit code to fail the job
    early": exit 42 is ignored (not counted, a new pod is made), exit 1 fails the job at once
    with reason PodFailurePolicy although the backoffLimit is far."""

    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        rules = [
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [42]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [1]}},
        ]
        await c.create(path, job("policy", completions=2, backoffLimit=6, podFailurePolicy={"rules": rules}))
        first = (await eventually(lambda: pods_of(c, ns, "policy"), what="a pod"))[0]
        await fail_with(c, first, 42)

        async def replaced() -> list[Obj]:
            pods = await pods_of(c, ns, "policy")
            return [p for p in pods if p["metadata"]["uid"] != first["metadata"]["uid"]]

        second = (await eventually(replaced, what="a pod in place of the ignored failure"))[0]
        held = await c.get(f"{path}/policy")
        assert not held["status"].get("failed") and condition(held) is None  # not counted
        await fail_with(c, second, 1)

        async def failed() -> Obj | None:
            got = await c.get(f"{path}/policy")
            return got if condition(got) == ("Failed", "PodFailurePolicy") else None

        done = await eventually(failed, what="Failed by the policy")
        final = next(x for x in done["status"]["conditions"] if x["type"] == "Failed")
        assert final["message"] == (
            f"Container c for pod {ns}/{second['metadata']['name']} failed with exit code 1"
            " matching FailJob rule at index 1"
        )
        assert done["status"]["failed"] == 1

    scenario(cluster, "job-policy", body)


def test_a_job_adopts_matching_orphans_and_releases_pods_that_stop_matching(cluster: ApiserverUnderTest) -> None:
    """Conformance "Job should adopt matching orphans and release non-matching pods" (kube's
    ClaimPods, _claim.py): a pod whose owner reference was removed is taken back; a pod whose
    labels no longer match the job's selector is let go."""

    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        made = await c.create(path, job("claim", parallelism=2, completions=2))
        uid = made["metadata"]["uid"]

        async def two() -> list[Obj]:
            pods = await pods_of(c, ns, "claim")
            return pods if len(pods) == 2 else []

        orphan, other = await eventually(two, what="two pods")
        pods_path = f"/api/v1/namespaces/{ns}/pods"
        await c.patch(f"{pods_path}/{orphan['metadata']['name']}", {"metadata": {"ownerReferences": None}})

        async def owner_of(name: str) -> str | None:
            refs = (await c.get(f"{pods_path}/{name}"))["metadata"].get("ownerReferences") or []
            return next((r["uid"] for r in refs if r.get("controller")), None)

        await eventually(lambda: _is(owner_of(orphan["metadata"]["name"]), uid), what="the orphan adopted")
        relabel = {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": None, "controller-uid": None}}}
        await c.patch(f"{pods_path}/{other['metadata']['name']}", relabel)
        await eventually(lambda: _is(owner_of(other["metadata"]["name"]), None), what="the pod released")

    scenario(cluster, "job-claim", body)


async def _is(got: Any, want: Any) -> bool:
    return await got == want
