"""pods/eviction against PodDisruptionBudgets (kube's EvictionREST): each outcome at the registry
layer over in-memory storage, then the 429 Status as a client receives it over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import objects
from apiserver.errors import StatusError
from apiserver.registry import eviction
from apiserver.registry.generic import Registry
from apiserver.registry.strategy import STATUS
from machinery.objects import Obj
from machinery.timestamps import format_time
from tests.apiserver.gates_support import in_process
from tests.apiserver.kinds_support import NOW, find, registry, run
from tests.apiserver.memstorage import MemStorage

NS = "default"


class Cluster:
    """Pods and PDBs over one storage, as the HTTP layer's registries."""

    def __init__(self) -> None:
        storage = MemStorage()
        self.pods: Registry = registry(find("", "pods"), storage)
        self.budgets: Registry = registry(find("policy", "poddisruptionbudgets"), storage)

    async def pod(self, name: str, *, ready: bool = True, phase: str = "Running", labels: Obj | None = None) -> Obj:
        body = {
            "metadata": {"name": name, "labels": labels if labels is not None else {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
        await self.pods.create(NS, body)

        def kubelet(old: Obj | None) -> Obj:
            assert old is not None
            cond = {"type": "Ready", "status": "True" if ready else "False"}
            old["status"] = {"phase": phase, "conditions": [cond]}
            return old

        obj, _ = await self.pods.mutate(NS, name, kubelet, subresource=STATUS)
        return obj

    async def budget(self, name: str = "b", *, status: Obj | None = None, **spec: Any) -> Obj:
        spec.setdefault("selector", {"matchLabels": {"app": "web"}})
        await self.budgets.create(NS, {"metadata": {"name": name}, "spec": spec})
        counted = {"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2}
        counted.update(status or {})

        def controller(old: Obj | None) -> Obj:
            assert old is not None
            old["status"] = counted
            return old

        obj, _ = await self.budgets.mutate(NS, name, controller, subresource=STATUS)
        return obj

    async def evict(self, name: str, body: Obj | None = None, query: dict[str, str] | None = None) -> None:
        await eviction.evict(self.pods, NS, name, body or {}, query or {}, self.budgets)

    async def exists(self, name: str) -> bool:
        try:
            await self.pods.get(NS, name)
        except StatusError as e:
            assert e.code == 404
            return False
        return True


def refused(coro: Any) -> StatusError:
    with pytest.raises(StatusError) as err:
        run(coro)
    return err.value


def test_no_budget_deletes() -> None:
    async def go() -> None:
        c = Cluster()
        await c.pod("p")
        await c.budget(selector={"matchLabels": {"app": "other"}}, status={"disruptionsAllowed": 0})
        await c.evict("p")
        assert not await c.exists("p")

    run(go())


def test_allowed_eviction_charges_the_budget() -> None:
    async def go() -> None:
        c = Cluster()
        await c.pod("p")
        before = await c.budget(status={"conditions": [{"type": "DisruptionAllowed", "status": "True"}]})
        await c.evict("p", {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}})
        assert not await c.exists("p")
        after = await c.budgets.get(NS, "b")
        assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
        assert after["status"]["disruptionsAllowed"] == 0
        assert after["status"]["disruptedPods"] == {"p": format_time(NOW)}
        cond = after["status"]["conditions"][0]
        assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == (
            "False",
            "InsufficientPods",
            format_time(NOW),
        )

    run(go())


def test_an_exhausted_budget_refuses_with_429() -> None:
    async def go() -> None:
        c = Cluster()
        await c.pod("p1")
        await c.pod("p2")
        await c.budget(status={"disruptionsAllowed": 1})
        await c.evict("p1")
        with pytest.raises(StatusError) as err:
            await c.evict("p2")  # the charge just written counts
        assert await c.exists("p2")
        e = err.value
        assert (e.code, e.reason, e.message) == (
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
        assert e.details == {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget b needs 2 healthy pods and has 3 currently",
                }
            ]
        }

    run(go())


def test_a_budget_not_yet_observed_refuses_with_429() -> None:
    async def go() -> None:
        c = Cluster()
        await c.pod("p")
        await c.budgets.create(NS, {"metadata": {"name": "new"}, "spec": {"minAvailable": 1, "selector": {}}})
        with pytest.raises(StatusError) as err:
            await c.evict("p")
        assert await c.exists("p")
        assert err.value.code == 429
        assert err.value.details["causes"] == [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget new is still being processed by the server.",
            }
        ]
        assert err.value.details["retryAfterSeconds"] == 10

    run(go())


def test_two_budgets_are_a_500() -> None:
    async def go() -> None:
        c = Cluster()
        await c.pod("p")
        await c.budget("one")
        await c.budget("two", selector={})
        with pytest.raises(StatusError) as err:
            await c.evict("p")
        assert (err.value.code, err.value.message) == (
            500,
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
        assert await c.exists("p")

    run(go())


def test_an_unready_pod_goes_without_charge_when_the_budget_is_met() -> None:
    async def go() -> None:
        c = Cluster()
        await c.pod("sick", ready=False)
        await c.budget(status={"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2})
        await c.evict("sick")
        assert not await c.exists("sick")
        assert "disruptedPods" not in (await c.budgets.get(NS, "b"))["status"]

    run(go())


def test_an_unready_pod_under_a_broken_budget_needs_always_allow() -> None:
    async def go() -> None:
        c = Cluster()
        await c.pod("sick", ready=False)
        await c.budget(status={"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 2})
        with pytest.raises(StatusError) as err:
            await c.evict("sick")  # IfHealthyBudget (the default): the budget decides
        assert err.value.code == 429 and await c.exists("sick")

        def always_allow(old: Obj | None) -> Obj:
            assert old is not None
            old["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow"
            return old

        def observed(old: Obj | None) -> Obj:
            assert old is not None
            old["status"]["observedGeneration"] = 2
            return old

        await c.budgets.mutate(NS, "b", always_allow)
        await c.budgets.mutate(NS, "b", observed, subresource=STATUS)
        await c.evict("sick")
        assert not await c.exists("sick")
        assert (await c.budgets.get(NS, "b"))["status"]["disruptionsAllowed"] == 0

    run(go())


def test_pods_that_disrupt_nothing_ignore_the_budget() -> None:
    async def go() -> None:
        c = Cluster()
        for name, phase in (("done", "Succeeded"), ("failed", "Failed"), ("pending", "Pending")):
            await c.pod(name, phase=phase)
        await c.budget(status={"disruptionsAllowed": 0, "observedGeneration": 0})
        for name in ("done", "failed", "pending"):
            await c.evict(name)
            assert not await c.exists(name)

    run(go())


def test_dry_run_checks_but_writes_nothing() -> None:
    async def go() -> None:
        c = Cluster()
        await c.pod("p1")
        await c.pod("p2")
        before = await c.budget(status={"disruptionsAllowed": 1})
        await c.evict("p1", query={"dryRun": "All"})
        await c.evict("p1", {"deleteOptions": {"dryRun": ["All"]}})
        assert await c.exists("p1")
        assert await c.budgets.get(NS, "b") == before

    run(go())
    c = Cluster()

    async def exhausted() -> None:
        await c.pod("p")
        await c.budget(status={"disruptionsAllowed": 0})
        await c.evict("p", query={"dryRun": "All"})

    assert refused(exhausted()).code == 429  # a dry run is refused as the real one would be


def test_hostile_eviction_bodies_and_budget_fields() -> None:
    async def body(evict_body: Any) -> None:
        c = Cluster()
        await c.pod("p")
        await c.evict("p", evict_body)

    assert refused(body({"deleteOptions": "now"})).message == "deleteOptions: expected an object"
    assert refused(body({"metadata": ["p"]})).message == "metadata: expected an object"
    assert refused(body({"metadata": {"name": "q"}})).message == "name in URL does not match name in Eviction object"
    assert refused(body({"deleteOptions": {"gracePeriodSeconds": "soon"}})).code == 400

    async def garbage_status() -> None:
        c = Cluster()
        await c.pod("p")
        await c.budgets.create(NS, {"metadata": {"name": "b"}, "spec": {"selector": {}}})
        # a status written around validation (straight into storage): every count of the wrong type
        stored = await c.budgets.get(NS, "b")
        stored["status"] = {"observedGeneration": "1", "disruptionsAllowed": "5", "disruptedPods": ["p"]}
        key = c.budgets.resource.key(NS, "b")
        await c.budgets.storage.update(key, objects.for_storage(stored), int(stored["metadata"]["resourceVersion"]))
        await c.evict("p")

    e = refused(garbage_status())
    assert e.code == 429 and "still being processed" in e.details["causes"][0]["message"]


def test_the_429_over_http_is_a_status_kubectl_can_read() -> None:
    async def go() -> None:
        async with in_process({}) as client_for:
            api = client_for("admin")
            pod = {
                "metadata": {"name": "p", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            }
            assert (await api.post("/api/v1/namespaces/default/pods", json=pod)).status_code == 201
            running = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
            r = await api.patch(
                "/api/v1/namespaces/default/pods/p/status",
                json=running,
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert r.status_code == 200, r.text
            pdb = {"metadata": {"name": "b"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
            base = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
            assert (await api.post(base, json=pdb)).status_code == 201
            status = {
                "status": {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}
            }
            r = await api.patch(
                f"{base}/b/status", json=status, headers={"Content-Type": "application/merge-patch+json"}
            )
            assert r.status_code == 200, r.text
            request_body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": "p", "namespace": "default"},
            }
            r = await api.post("/api/v1/namespaces/default/pods/p/eviction", json=request_body)
            assert r.status_code == 429, r.text
            assert r.json() == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                "reason": "TooManyRequests",
                "details": {
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": "The disruption budget b needs 1 healthy pods and has 1 currently",
                        }
                    ]
                },
                "code": 429,
            }
            assert "retry-after" not in r.headers  # a spent budget: no time to promise
            r = await api.patch(
                f"{base}/b/status",
                json={"status": {"observedGeneration": 0}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            r = await api.post("/api/v1/namespaces/default/pods/p/eviction", json=request_body)
            assert r.status_code == 429 and r.headers["retry-after"] == "10", r.text
            assert r.json()["details"]["retryAfterSeconds"] == 10
            r = await api.patch(
                f"{base}/b/status",
                json={"status": {"disruptionsAllowed": 1, "observedGeneration": 1}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert r.status_code == 200, r.text
            r = await api.post("/api/v1/namespaces/default/pods/p/eviction", json=request_body)
            assert r.status_code == 201, r.text
            assert (await api.get("/api/v1/namespaces/default/pods/p")).status_code == 404
            got = (await api.get(f"{base}/b")).json()["status"]
            assert got["disruptionsAllowed"] == 0 and set(got["disruptedPods"]) == {"p"}

    run(go())


def test_an_evicted_pod_is_marked_disruption_target_before_it_goes() -> None:
    """kube's addConditionAndDeletePod: a pod kept by a finalizer (or a grace period) after its
    eviction says why it is going, so a Job's podFailurePolicy can ignore evictions."""

    async def go() -> Obj:
        c = Cluster()
        await c.pod("p")

        def keep(old: Obj | None) -> Obj:
            assert old is not None
            old["metadata"]["finalizers"] = ["example.com/keep"]
            return old

        await c.pods.mutate(NS, "p", keep)
        await c.evict("p")
        return await c.pods.get(NS, "p")

    pod = run(go())
    assert pod["metadata"].get("deletionTimestamp")
    marks = [x for x in pod["status"]["conditions"] if x["type"] == "DisruptionTarget"]
    assert len(marks) == 1 and marks[0]["status"] == "True" and marks[0]["reason"] == "EvictionByEvictionAPI"
    assert marks[0]["message"] == "Eviction API: evicting"
