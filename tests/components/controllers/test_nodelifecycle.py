"""The node lifecycle controller: its pure decisions, and against a real apiserver a node whose
Lease stops is marked Unknown, tainted, its pods evicted after their toleration, and untainted
with Ready restored when the Lease renews again."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from typing import Any

from components.client import kubeconfig
from components.client.rest import NotFoundError, RestClient
from components.controllers._infra_nodes import UNREACHABLE, eviction_at, silenced, wanted_taints
from components.controllers.nodelifecycle import NodeLifecycleController
from components.controllers.runner import running
from machinery.objects import Obj
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_endpoints_support import namespace, pod, run, until


def test_silenced_conditions_and_taints_by_ready() -> None:
    conds = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "H", "lastTransitionTime": "T0"}]
    (ready,) = silenced(conds, "T1")
    assert ready == {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": "H",
        "lastTransitionTime": "T1",
    }
    mine = {"key": "example.com/x", "effect": "NoSchedule"}
    unknown = wanted_taints([mine], "Unknown", "T")
    assert unknown == [
        mine,
        {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": "T"},
        {"key": UNREACHABLE, "effect": "NoSchedule"},
    ]
    assert wanted_taints(unknown, "Unknown", "later") == unknown  # timeAdded kept
    assert [t["key"] for t in wanted_taints(unknown, "False", "T")] == [
        "example.com/x",
        *["node.kubernetes.io/not-ready"] * 2,
    ]
    assert wanted_taints(unknown, "True", "T") == [mine]
    assert wanted_taints(unknown, None, "T") == unknown


def test_eviction_waits_for_the_shortest_toleration() -> None:
    taint = {"key": UNREACHABLE, "effect": "NoExecute"}
    no_tolerations: Obj = {"spec": {}}
    short = {
        "spec": {
            "tolerations": [
                {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 3},
                {"operator": "Exists", "tolerationSeconds": 9},
            ]
        }
    }
    forever = {"spec": {"tolerations": [{"operator": "Exists"}]}}
    other = {"spec": {"tolerations": [{"key": "x", "operator": "Exists"}]}}
    assert eviction_at(no_tolerations, [(taint, 10.0)]) == 10.0
    assert eviction_at(short, [(taint, 10.0)]) == 13.0
    assert eviction_at(forever, [(taint, 10.0)]) is None
    assert eviction_at(other, [(taint, 10.0)]) == 10.0


def micro(t: datetime.datetime | None = None) -> str:
    return (t or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Fast(NodeLifecycleController):
    grace_period = 2.0


def test_a_silent_node_is_tainted_and_emptied_then_recovers(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            node = "nlc-node"
            await client.create("/api/v1/nodes", {"metadata": {"name": node}})
            ready = {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
            }
            await client.patch(
                f"/api/v1/nodes/{node}/status",
                {
                    "status": {
                        "conditions": [
                            ready | {"lastHeartbeatTime": micro()[:19] + "Z", "lastTransitionTime": micro()[:19] + "Z"}
                        ]
                    }
                },
                "strategic",
            )
            leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
            with contextlib.suppress(Exception):
                await client.create("/api/v1/namespaces", {"metadata": {"name": "kube-node-lease"}})
            await client.create(
                leases,
                {
                    "metadata": {"name": node},
                    "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": micro()},
                },
            )
            renewing = asyncio.Event()
            renewing.set()

            async def kubelet() -> None:
                while True:
                    await renewing.wait()
                    lease = await client.get(f"{leases}/{node}")
                    lease["spec"]["renewTime"] = micro()
                    await client.replace(f"{leases}/{node}", lease)
                    await asyncio.sleep(0.3)

            ns = await namespace(client, "nlc-pods")
            tol = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}]
            await pod(client, ns, "short", {}, node=node, extra_spec={"tolerations": tol})
            await pod(client, ns, "long", {}, node=node)  # DefaultTolerationSeconds: 300 s

            async def get_node() -> Obj:
                return await client.get(f"/api/v1/nodes/{node}")

            def keys(n: Obj) -> set[tuple[str, str]]:
                return {(t["key"], t["effect"]) for t in (n.get("spec") or {}).get("taints") or []}

            def ready_of(n: Obj) -> Obj:
                return next(c for c in n["status"]["conditions"] if c["type"] == "Ready")

            beat = asyncio.create_task(kubelet())
            try:
                async with running(client, [Fast]):
                    # ready: the admission's not-ready:NoSchedule comes off
                    await until(lambda: _is(get_node(), lambda n: not keys(n)))
                    await asyncio.sleep(2.5)  # past the grace period: renewals keep it healthy
                    assert not keys(await get_node()) and ready_of(await get_node())["status"] == "True"

                    renewing.clear()
                    await until(lambda: _is(get_node(), lambda n: (UNREACHABLE, "NoExecute") in keys(n)))
                    n = await get_node()
                    assert ready_of(n)["status"] == "Unknown" and ready_of(n)["reason"] == "NodeStatusUnknown"
                    assert ready_of(n)["message"] == "Kubelet stopped posting node status."
                    assert any(t.get("timeAdded") for t in n["spec"]["taints"] if t["effect"] == "NoExecute")

                    async def evicted(name: str) -> bool:
                        try:
                            p = await client.get(f"/api/v1/namespaces/{ns}/pods/{name}")
                        except NotFoundError:
                            return True
                        return bool(p["metadata"].get("deletionTimestamp"))

                    await until(lambda: evicted("short"))
                    assert not await evicted("long")

                    renewing.set()
                    await until(lambda: _is(get_node(), lambda n: not keys(n) and ready_of(n)["status"] == "True"))
                    assert ready_of(await get_node())["reason"] == "KubeletReady"
                    assert not await evicted("long")
            finally:
                beat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beat

    run(go)


async def _is(got: Any, check: Any) -> bool:
    return bool(check(await got))
