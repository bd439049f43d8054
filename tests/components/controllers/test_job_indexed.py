"""Indexed Jobs: kube's index lists (units, never expanded), the pod of an index, an indexed
job's verdicts, and against a real apiserver: one pod per index with its identity, completed
indexes, a success policy, and failed indexes under backoffLimitPerIndex/maxFailedIndexes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from components.client.rest import RestClient
from components.controllers import _job_indexes as ix
from machinery.objects import Obj
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_job import condition, finish, job, pods_of, scenario
from tests.support.wait import eventually


def test_index_lists_are_kubes_and_never_expand() -> None:
    parsed = ix.Intervals.parse("0,2-4,7", 10)
    assert str(parsed) == "0,2-4,7" and parsed.total() == 5 and 3 in parsed and 5 not in parsed
    assert str(parsed.with_index(1).with_index(5).with_index(6)) == "0-7"
    assert str(ix.Intervals.parse("3-99999999", 10)) == "3-9"  # clipped to completions, not walked
    assert ix.Intervals.parse("1,x", 10) == ix.Intervals() == ix.Intervals.parse("5-2", 10)
    assert list(ix.missing(10, [parsed], 3)) == [1, 5, 6]
    assert list(ix.missing(3, [ix.Intervals.parse("0-2", 3)], 5)) == []
    huge = ix.Intervals.parse("0-99998", 100_000)
    assert list(ix.missing(100_000, [huge], 5)) == [99_999]
    assert ix.overlap(ix.Intervals.parse("0-4", 9), ix.Intervals.parse("3-8", 9)) == 2


@given(st.sets(st.integers(0, 60), max_size=40))
def test_intervals_hold_exactly_what_was_added(indexes: set[int]) -> None:
    built = ix.Intervals()
    for i in sorted(indexes, reverse=True):
        built = built.with_index(i)
    assert {i for i in range(61) if i in built} == indexes and built.total() == len(indexes)
    assert ix.Intervals.parse(str(built), 61) == built
    assert set(ix.missing(61, [built], 61)) == set(range(61)) - indexes


def test_the_pod_of_an_index() -> None:
    pod: Obj = {"metadata": {}, "spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "i"}]}}
    ix.with_index(pod, "work", 3, 1)
    assert pod["metadata"]["generateName"] == "work-3-" and pod["spec"]["hostname"] == "work-3"
    assert pod["metadata"]["annotations"] == {ix.COMPLETION_INDEX: "3", ix.FAILURE_COUNT: "1"}
    assert pod["metadata"]["labels"] == {ix.COMPLETION_INDEX: "3"}
    for member in ("containers", "initContainers"):
        assert pod["spec"][member][0]["env"][0]["name"] == "JOB_COMPLETION_INDEX"
    assert ix.index_of(pod) == 3 and ix.failure_count(pod) == 1


def test_indexed_verdicts() -> None:
    def verdict(completed: str, failed: str, **spec: object) -> tuple[str, str] | None:
        found = ix.indexed_verdict(
            {"spec": {"completions": 4, **spec}}, ix.Intervals.parse(completed, 4), ix.Intervals.parse(failed, 4)
        )
        return None if found is None else (found.type, found.reason)

    rules = {"successPolicy": {"rules": [{"succeededIndexes": "0-1", "succeededCount": 1}]}}
    assert verdict("0", "", **rules) is None
    assert verdict("0-1", "", **rules) == ("Complete", "SuccessPolicy")
    assert verdict("", "0-1", maxFailedIndexes=1) == ("Failed", "MaxFailedIndexesExceeded")
    assert verdict("0,2", "1,3") == ("Failed", "FailedIndexes")
    assert verdict("0,2", "1") is None


def test_an_indexed_job_runs_each_index_once_and_completes(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        await c.create(path, job("idx", completions=3, parallelism=2, completionMode="Indexed"))

        async def finish_running() -> bool:
            j = await c.get(f"{path}/idx")
            if condition(j) is not None:
                return True
            for p in await pods_of(c, ns, "idx"):
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    await finish(c, p, "Succeeded")
            return False

        await eventually(finish_running, what="the indexed job complete")
        j = await c.get(f"{path}/idx")
        assert condition(j) == ("Complete", "CompletionsReached")
        assert j["status"]["completedIndexes"] == "0-2" and j["status"]["succeeded"] == 3
        pods = await pods_of(c, ns, "idx")
        assert sorted(ix.index_of(p) for p in pods) == [0, 1, 2]
        assert all(p["spec"]["hostname"] == f"idx-{ix.index_of(p)}" for p in pods)

    scenario(cluster, "job-indexed", body)


def test_failed_indexes_under_a_per_index_limit(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        await c.create(path, job("odd", completions=4, parallelism=4, completionMode="Indexed", backoffLimitPerIndex=1))

        async def odd_fail_even_succeed() -> bool:
            j = await c.get(f"{path}/odd")
            if condition(j) is not None:
                return True
            for p in await pods_of(c, ns, "odd"):
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    await finish(c, p, "Failed" if (ix.index_of(p) or 0) % 2 else "Succeeded")
            return False

        await eventually(odd_fail_even_succeed, what="the job failed on its odd indexes")
        j = await c.get(f"{path}/odd")
        assert condition(j) == ("Failed", "FailedIndexes")
        st = j["status"]
        assert (st["completedIndexes"], st["failedIndexes"], st["succeeded"], st["failed"]) == ("0,2", "1,3", 2, 4)
        retried = [p for p in await pods_of(c, ns, "odd") if p["metadata"]["annotations"].get(ix.FAILURE_COUNT) == "1"]
        assert sorted(ix.index_of(p) for p in retried) == [1, 3]

    scenario(cluster, "job-per-index", body)


def test_a_success_policy_ends_the_job_with_indexes_pending(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, ns: str) -> None:
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        policy = {"rules": [{"succeededIndexes": "0"}]}
        await c.create(path, job("lead", completions=5, parallelism=2, completionMode="Indexed", successPolicy=policy))

        async def index_zero_succeeds() -> bool:
            j = await c.get(f"{path}/lead")
            if condition(j) is not None:
                return True
            for p in await pods_of(c, ns, "lead"):
                if ix.index_of(p) == 0 and (p.get("status") or {}).get("phase") != "Succeeded":
                    await finish(c, p, "Succeeded")
            return False

        await eventually(index_zero_succeeds, what="the success policy met")
        j = await c.get(f"{path}/lead")
        assert condition(j) == ("Complete", "SuccessPolicy")
        assert j["status"]["completedIndexes"] == "0" and j["status"]["active"] == 0

    scenario(cluster, "job-success-policy", body)
