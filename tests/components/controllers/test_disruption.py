"""PodDisruptionBudgets end to end against a real cluster: the disruption controller keeps a
budget's status from the pods it selects (here three ready pods of a ReplicaSet), the apiserver's
pods/eviction charges it and refuses with 429 once it is spent, kubectl shows the allowed
disruptions, and `kubectl drain` of the pods' node fails citing the budget, then finishes once
the budget allows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from components.client import kubeconfig
from components.client.rest import RestClient, TooManyRequestsError
from components.controllers.disruption import DisruptionController
from components.controllers.runner import running
from machinery.objects import Obj
from tests.apiserver.support import ApiserverUnderTest, kubectl_binary
from tests.components.controllers.test_endpoints_support import namespace, pod, run, set_pod_status, until

NS = "pdb-e2e"
NODE = "pdb-node"
VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."


def eviction(name: str) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}


async def replica_set_with_ready_pods(client: RestClient, replicas: int) -> list[str]:
    """A ReplicaSet and its pods on NODE, marked Running and Ready as a kubelet would (no
    replicaset controller runs: the pods are made here, owned by it)."""
    labels = {"app": "web"}
    rs = await client.create(
        f"/apis/apps/v1/namespaces/{NS}/replicasets",
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
            },
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web",
        "uid": rs["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    names = [f"web-{i}" for i in range(replicas)]
    for i, name in enumerate(names):
        await pod(client, NS, name, labels, node=NODE)
        await client.patch(f"/api/v1/namespaces/{NS}/pods/{name}", {"metadata": {"ownerReferences": [owner]}})
        await set_pod_status(client, NS, name, f"10.9.0.{i + 1}", ready=True)
    return names


def test_budget_status_eviction_and_drain(cluster: ApiserverUnderTest) -> None:
    budgets = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"

    async def status_is(client: RestClient, **want: Any) -> Obj | None:
        got = (await client.get(f"{budgets}/web")).get("status") or {}
        return got if all(got.get(k) == v for k, v in want.items()) else None

    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            await namespace(client, NS)
            await client.create("/api/v1/nodes", {"metadata": {"name": NODE}})
            names = await replica_set_with_ready_pods(client, 3)
            # a percent budget counts the ReplicaSet's replicas: 3 - ceil(34% of 3) = 1 must stay
            spec = {"maxUnavailable": "34%", "selector": {"matchLabels": {"app": "web"}}}
            await client.create(budgets, {"metadata": {"name": "web"}, "spec": spec})
            async with running(client, [DisruptionController]):
                await until(
                    lambda: status_is(
                        client,
                        observedGeneration=1,
                        expectedPods=3,
                        desiredHealthy=1,
                        currentHealthy=3,
                        disruptionsAllowed=2,
                    )
                )
                await client.patch(f"{budgets}/web", {"spec": {"maxUnavailable": None, "minAvailable": 2}})
                got = await until(
                    lambda: status_is(
                        client,
                        observedGeneration=2,
                        expectedPods=3,
                        desiredHealthy=2,
                        currentHealthy=3,
                        disruptionsAllowed=1,
                    )
                )
                cond = got["conditions"][0]
                assert (cond["type"], cond["status"], cond["reason"]) == (
                    "DisruptionAllowed",
                    "True",
                    "SufficientPods",
                )

                answer = await client.create(f"/api/v1/namespaces/{NS}/pods/{names[0]}/eviction", eviction(names[0]))
                assert (answer["status"], answer["code"]) == ("Success", 201)
                with pytest.raises(TooManyRequestsError) as err:
                    await client.create(f"/api/v1/namespaces/{NS}/pods/{names[1]}/eviction", eviction(names[1]))
                assert err.value.code == 429 and err.value.message == VIOLATES
                # 3 healthy if the controller has not recounted since the eviction, else 2
                assert err.value.status["details"]["causes"] in [
                    [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget web needs 2 healthy pods and has {n} currently",
                        }
                    ]
                    for n in (3, 2)
                ]
                # the evicted pod is deleting (its node has a grace period to honour): the
                # controller counts it out and drops it from disruptedPods
                got = await until(lambda: status_is(client, currentHealthy=2, disruptionsAllowed=0, disruptedPods=None))
                assert got["conditions"][0]["reason"] == "InsufficientPods"

                table = await asyncio.to_thread(cluster.ok, "get", "pdb", "-n", NS)
                header, row = table.splitlines()[:2]
                assert header.split() == [
                    "NAME",
                    "MIN",
                    "AVAILABLE",
                    "MAX",
                    "UNAVAILABLE",
                    "ALLOWED",
                    "DISRUPTIONS",
                    "AGE",
                ]
                assert row.split()[:4] == ["web", "2", "N/A", "0"]

                drain = await asyncio.to_thread(
                    cluster.kubectl, "drain", NODE, "--ignore-daemonsets", "--timeout=5s", timeout=90
                )
                assert drain.returncode != 0, drain.stdout
                assert VIOLATES in drain.stderr, drain.stderr
                for name in names[1:]:
                    live = await client.get(f"/api/v1/namespaces/{NS}/pods/{name}")
                    assert not live["metadata"].get("deletionTimestamp")

                # a drain that is refused keeps retrying, and finishes once the budget allows
                # (grace 0: no kubelet runs here to end the pods, the eviction deletes them)
                drain = await drain_until_refused(cluster, "--ignore-daemonsets", "--grace-period=0", "--timeout=60s")
                await client.patch(f"{budgets}/web", {"spec": {"minAvailable": 0}})
                out, err = await asyncio.wait_for(drain.communicate(), 90)
                assert drain.returncode == 0, err.decode()[-3000:]
                assert f"node/{NODE} drained" in out.decode(), out.decode()
                left = await client.get(f"/api/v1/namespaces/{NS}/pods", {"fieldSelector": f"spec.nodeName={NODE}"})
                assert left["items"] == []

    run(go)


async def drain_until_refused(cluster: ApiserverUnderTest, *flags: str) -> asyncio.subprocess.Process:
    """`kubectl drain NODE`, running, once it has reported an eviction refused by the budget."""
    argv = [str(kubectl_binary(33)), "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(cluster.cache_dir)]
    proc = await asyncio.create_subprocess_exec(
        *argv, "drain", NODE, *flags, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stderr is not None
    seen: list[bytes] = []
    try:
        async with asyncio.timeout(60):
            while VIOLATES.encode() not in (line := await proc.stderr.readline()):
                assert line, f"drain ended before a refusal: {b''.join(seen).decode()[-3000:]}"
                seen.append(line)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    return proc


def test_scale_of_a_deployment_and_an_unknown_controller(cluster: ApiserverUnderTest) -> None:
    """A percent budget counts a Deployment's replicas once (not its ReplicaSet's); a pod whose
    controller cannot be found makes it SyncFailed with nothing allowed, until that pod goes."""
    ns = "pdb-scale"
    budgets = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
    labels = {"app": "api"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}

    def owner(obj: Obj, kind: str) -> Obj:
        return {"apiVersion": "apps/v1", "kind": kind, "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}

    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            await namespace(client, ns)
            spec = {"replicas": 4, "selector": {"matchLabels": labels}, "template": template}
            deploy = await client.create(
                f"/apis/apps/v1/namespaces/{ns}/deployments", {"metadata": {"name": "api"}, "spec": spec}
            )
            rs_meta = {"name": "api-1", "ownerReferences": [{**owner(deploy, "Deployment"), "controller": True}]}
            rs = await client.create(
                f"/apis/apps/v1/namespaces/{ns}/replicasets", {"metadata": rs_meta, "spec": {**spec, "replicas": 2}}
            )
            for i in range(2):
                await pod(client, ns, f"api-{i}", labels)
                await client.patch(
                    f"/api/v1/namespaces/{ns}/pods/api-{i}",
                    {"metadata": {"ownerReferences": [{**owner(rs, "ReplicaSet"), "controller": True}]}},
                )
                await set_pod_status(client, ns, f"api-{i}", f"10.8.0.{i + 1}", ready=True)
            stray = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "0000", "controller": True}
            await client.create(
                f"/api/v1/namespaces/{ns}/pods",
                {
                    "metadata": {"name": "stray", "labels": labels, "ownerReferences": [stray]},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            )
            body = {"metadata": {"name": "api"}, "spec": {"minAvailable": "50%", "selector": {"matchLabels": labels}}}
            await client.create(budgets, body)

            async def condition() -> Obj | None:
                status = (await client.get(f"{budgets}/api")).get("status") or {}
                conds = status.get("conditions") or [{}]
                return {**conds[0], "allowed": status.get("disruptionsAllowed")} if conds[0] else None

            async with running(client, [DisruptionController]):
                failed = await until(condition)
                assert (failed["status"], failed["reason"], failed["allowed"]) == ("False", "SyncFailed", 0)
                assert failed["message"] == 'found no controllers for pod "stray"'
                await client.delete(f"/api/v1/namespaces/{ns}/pods/stray")

                async def counted() -> Obj | None:
                    status = (await client.get(f"{budgets}/api")).get("status") or {}
                    return status if status.get("expectedPods") == 4 else None

                status = await until(counted)
                # 50% of the Deployment's 4 replicas must stay; 2 are healthy: nothing allowed
                assert (status["desiredHealthy"], status["currentHealthy"], status["disruptionsAllowed"]) == (2, 2, 0)
                await client.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/api", {"spec": {"replicas": 2}})

                async def rescaled() -> Obj | None:
                    status = (await client.get(f"{budgets}/api")).get("status") or {}
                    return status if status.get("expectedPods") == 2 else None

                status = await until(rescaled)  # a Deployment's scale change recounts the budget
                assert (status["desiredHealthy"], status["disruptionsAllowed"]) == (1, 1)

    run(go)
