"""ResourceQuota and LimitRanger through HTTP (in-process app, in-memory storage): a quota of
10 pods admits exactly 10 of 50 concurrent creates, a delete gives its charge back, cpu
requests count, and LimitRanges default and bound containers and pods with kube's words."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.apiserver.gates_support import in_process

NS = "/api/v1/namespaces/default"


def pod(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if resources:
        container["resources"] = resources
    return {"metadata": {"name": name}, "spec": {"containers": [container], "automountServiceAccountToken": False}}


async def synced(client: httpx.AsyncClient, kind: str) -> None:
    """A consistent LIST returns once the kind's watch cache has every write so far: the
    plugins read quotas and limit ranges from those caches."""
    assert (await client.get(f"{NS}/{kind}")).status_code == 200


def test_fifty_concurrent_creates_against_a_quota_of_ten() -> None:
    async def go() -> None:
        async with in_process({}) as client:
            admin = client("admin")
            quota = {"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "10", "count/configmaps": "1"}}}
            assert (await admin.post(f"{NS}/resourcequotas", json=quota)).status_code == 201
            await synced(admin, "resourcequotas")
            assert (await admin.post(f"{NS}/configmaps", json={"metadata": {"name": "first"}})).status_code == 201
            used = (await admin.get(f"{NS}/resourcequotas/pods")).json()["status"]["used"]
            assert used == {"count/configmaps": "1"}
            over = await admin.post(f"{NS}/configmaps", json={"metadata": {"name": "second"}})
            assert over.status_code == 403
            assert over.json()["message"] == (
                'configmaps "second" is forbidden: exceeded quota: pods, requested: count/configmaps=1, '
                "used: count/configmaps=1, limited: count/configmaps=1"
            )
            answers = await asyncio.gather(*(admin.post(f"{NS}/pods", json=pod(f"p{i}")) for i in range(50)))
            codes = sorted(r.status_code for r in answers)
            assert codes == [201] * 10 + [403] * 40
            refused = next(r for r in answers if r.status_code == 403)
            assert (
                "exceeded quota: pods, requested: pods=1, used: pods=10, limited: pods=10" in refused.json()["message"]
            )
            listed = (await admin.get(f"{NS}/pods")).json()["items"]
            assert len(listed) == 10
            status = (await admin.get(f"{NS}/resourcequotas/pods")).json()["status"]
            assert status["used"]["pods"] == "10" and status["hard"]["pods"] == "10"
            # a delete gives the charge back
            gone = listed[0]["metadata"]["name"]
            assert (await admin.delete(f"{NS}/pods/{gone}", params={"gracePeriodSeconds": "0"})).status_code == 200
            assert (await admin.get(f"{NS}/resourcequotas/pods")).json()["status"]["used"]["pods"] == "9"
            assert (await admin.post(f"{NS}/pods", json=pod("again"))).status_code == 201

    asyncio.run(go())


def test_cpu_requests_count_against_a_quota() -> None:
    async def go() -> None:
        async with in_process({}) as client:
            admin = client("admin")
            quota = {"metadata": {"name": "cpu"}, "spec": {"hard": {"requests.cpu": "1", "limits.memory": "1Gi"}}}
            assert (await admin.post(f"{NS}/resourcequotas", json=quota)).status_code == 201
            await synced(admin, "resourcequotas")
            vague = await admin.post(f"{NS}/pods", json=pod("vague", limits={"memory": "1Mi"}))
            assert vague.status_code == 403
            assert vague.json()["message"] == 'pods "vague" is forbidden: failed quota: cpu: must specify requests.cpu'
            small = pod("a", requests={"cpu": "600m"}, limits={"memory": "512Mi"})
            assert (await admin.post(f"{NS}/pods", json=small)).status_code == 201
            r = await admin.post(f"{NS}/pods", json=pod("b", requests={"cpu": "500m"}, limits={"memory": "256Mi"}))
            assert r.status_code == 403
            assert r.json()["message"] == (
                'pods "b" is forbidden: exceeded quota: cpu, requested: requests.cpu=500m, '
                "used: requests.cpu=600m, limited: requests.cpu=1"
            )
            ok = await admin.post(f"{NS}/pods", json=pod("c", requests={"cpu": "400m"}, limits={"memory": "256Mi"}))
            assert ok.status_code == 201
            used = (await admin.get(f"{NS}/resourcequotas/cpu")).json()["status"]["used"]
            assert used == {"limits.memory": "768Mi", "requests.cpu": "1"}

    asyncio.run(go())


def test_limit_ranges_default_and_bound() -> None:
    async def go() -> None:
        async with in_process({}) as client:
            admin = client("admin")
            limits = {
                "metadata": {"name": "bounds"},
                "spec": {
                    "limits": [
                        {
                            "type": "Container",
                            "default": {"cpu": "500m", "memory": "256Mi"},
                            "defaultRequest": {"cpu": "100m"},
                            "max": {"cpu": "1"},
                            "min": {"cpu": "50m"},
                        },
                        {"type": "Pod", "max": {"memory": "1Gi"}},
                    ]
                },
            }
            assert (await admin.post(f"{NS}/limitranges", json=limits)).status_code == 201
            await synced(admin, "limitranges")
            made = await admin.post(f"{NS}/pods", json=pod("plain"))
            got = made.json()
            assert got["spec"]["containers"][0]["resources"] == {
                "limits": {"cpu": "500m", "memory": "256Mi"},
                "requests": {"cpu": "100m", "memory": "256Mi"},
            }
            assert got["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
                "LimitRanger plugin set: cpu, memory limit for container c; cpu, memory request for container c"
            )
            assert got["status"]["qosClass"] == "Burstable"
            big = await admin.post(f"{NS}/pods", json=pod("big", limits={"cpu": "2"}))
            assert big.status_code == 403
            assert big.json()["message"] == (
                'pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
            )
            tiny = await admin.post(f"{NS}/pods", json=pod("tiny", requests={"cpu": "10m"}))
            assert tiny.json()["message"] == (
                'pods "tiny" is forbidden: minimum cpu usage per Container is 50m, but request is 10m'
            )
            fat = await admin.post(f"{NS}/pods", json=pod("fat", limits={"memory": "2Gi"}))
            assert (
                fat.json()["message"]
                == 'pods "fat" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 2Gi'
            )

    asyncio.run(go())
