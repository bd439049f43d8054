"""The resourcequota controller: its pure recount, and against a real apiserver `status.used`
is recounted from what the namespace holds (objects made before the controller started, a
status someone got wrong, creates, deletes, pods that finished)."""

from __future__ import annotations

from typing import Any

import pytest

from components.client import kubeconfig
from components.client.rest import ForbiddenError, NotFoundError, RestClient
from components.controllers._infra_quota import used
from components.controllers.resourcequota import ResourceQuotaController
from components.controllers.runner import running
from machinery.objects import Obj
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_endpoints_support import namespace, run, until


def cpu_pod(cpu: str, phase: str = "Running", **spec: Any) -> Obj:
    containers = [{"name": "c", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]
    return {"spec": {"containers": containers, **spec}, "status": {"phase": phase}}


def test_used_follows_admissions_rules() -> None:
    quota: Obj = {"spec": {"hard": {"pods": "9", "requests.cpu": "4", "count/leases.coordination.k8s.io": "2"}}}
    pods = [cpu_pod("250m"), cpu_pod("1"), cpu_pod("2", phase="Succeeded")]
    objects: dict[tuple[str, str], list[Obj]] = {("", "pods"): pods, ("coordination.k8s.io", "leases"): [{}, {}, {}]}
    assert used(quota, lambda gr: objects.get(gr, [])) == {
        "pods": "2",
        "requests.cpu": "1250m",
        "count/leases.coordination.k8s.io": "3",
    }
    scoped: Obj = {"spec": {"hard": {"pods": "9"}, "scopes": ["Terminating"]}}
    assert used(scoped, lambda gr: [cpu_pod("1"), cpu_pod("1", activeDeadlineSeconds=5)]) == {"pods": "1"}
    assert used({"spec": {"hard": {"persistentvolumeclaims": "1"}}}, lambda gr: []) == {"persistentvolumeclaims": "0"}


def test_used_is_recounted(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            ns = await namespace(client, "rq-count")
            base = f"/api/v1/namespaces/{ns}"
            for name in ("a", "b"):
                await client.create(f"{base}/configmaps", {"metadata": {"name": name}})
            cpu = {"image": "busybox", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}}}
            await client.create(
                f"{base}/pods", {"metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", **cpu}]}}
            )
            await client.create(
                f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", {"metadata": {"name": "l"}, "spec": {}}
            )
            hard = {
                "pods": "10",
                "configmaps": "10",
                "requests.cpu": "2",
                "count/leases.coordination.k8s.io": "5",
                "persistentvolumeclaims": "3",
            }
            q = await client.create(f"{base}/resourcequotas", {"metadata": {"name": "q"}, "spec": {"hard": hard}})
            # someone got the status wrong before the controller started
            q = await client.get(f"{base}/resourcequotas/q")
            q["status"] = {"hard": {"pods": "1"}, "used": dict.fromkeys(hard, "7")}
            await client.replace(f"{base}/resourcequotas/q/status", q)

            async def status_is(want_used: dict[str, str]) -> bool:
                got = (await client.get(f"{base}/resourcequotas/q")).get("status") or {}
                return got.get("used") == want_used and got.get("hard") == hard

            async with running(client, [ResourceQuotaController]):
                want = {
                    "pods": "1",
                    "configmaps": "2",
                    "requests.cpu": "100m",
                    "count/leases.coordination.k8s.io": "1",
                    "persistentvolumeclaims": "0",
                }
                await until(lambda: status_is(want))
                await client.create(
                    f"{base}/pods", {"metadata": {"name": "p2"}, "spec": {"containers": [{"name": "c", **cpu}]}}
                )
                await client.delete(f"{base}/configmaps/a")
                await until(lambda: status_is(want | {"pods": "2", "configmaps": "1", "requests.cpu": "200m"}))
                # a pod that finished uses nothing (admission never gives that back: the recount does)
                await client.patch(f"{base}/pods/p1/status", {"status": {"phase": "Succeeded"}})
                await until(lambda: status_is(want | {"pods": "1", "configmaps": "1", "requests.cpu": "100m"}))

    run(go)


def test_a_quota_counts_custom_resources(cluster: ApiserverUnderTest) -> None:
    """`count/<plural>.<group>` on a CustomResourceDefinition's kind: admission refuses the
    object past the quota with kube's message, and the controller's recount (which finds the
    kind in discovery) reports what the namespace holds — also what was there before the quota."""

    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            ns = await namespace(client, "rq-custom")
            group = "quota.example.com"
            crd = {
                "metadata": {"name": f"gadgets.{group}"},
                "spec": {
                    "group": group,
                    "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {"openAPIV3Schema": {"type": "object"}},
                        }
                    ],
                },
            }
            await client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            gadgets = f"/apis/{group}/v1/namespaces/{ns}/gadgets"

            async def served() -> bool:
                try:
                    await client.get(gadgets)
                except NotFoundError:
                    return False
                return True

            await until(served)
            await client.create(gadgets, {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g1"}})
            hard = {f"count/gadgets.{group}": "2"}
            base = f"/api/v1/namespaces/{ns}/resourcequotas"
            await client.create(base, {"metadata": {"name": "q"}, "spec": {"hard": hard}})

            async def used_is(count: str) -> bool:
                got = (await client.get(f"{base}/q")).get("status") or {}
                return got.get("used") == {f"count/gadgets.{group}": count}

            async with running(client, [ResourceQuotaController]):
                await until(lambda: used_is("1"))  # the gadget made before the quota is counted
                await client.create(
                    gadgets, {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g2"}}
                )
                with pytest.raises(ForbiddenError) as refused:
                    await client.create(
                        gadgets, {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g3"}}
                    )
                assert f"exceeded quota: q, requested: count/gadgets.{group}=1" in refused.value.message
                await until(lambda: used_is("2"))

    run(go)
