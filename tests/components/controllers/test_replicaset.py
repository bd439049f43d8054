"""The replicaset controller: unit tests of its parts (deletion order, slow start, expectations,
a burst of events against a fake client) and tests against a real apiserver (create, scale,
adopt, release, status)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from components.client.informer import InformerFactory
from components.client.rest import RestClient
from components.controllers._workload_expectations import Expectations
from components.controllers._workload_pods import pods_to_delete, selector_matches
from components.controllers.replicaset import ReplicaSetController, ReplicationManager, slow_start_batch
from components.controllers.resourcequota import ResourceQuotaController
from components.controllers.runner import running
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_replicaset_support import (
    api,
    is_ready,
    kubelet,
    make_namespace,
    pods_of,
    ready_status,
)
from tests.support.wait import eventually

NOW = 1_700_000_000.0


def iso(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    *,
    node: str = "",
    phase: str = "Pending",
    ready_at: float | None = None,
    created: float = NOW - 100,
    restarts: int = 0,
    cost: int | None = None,
) -> dict[str, Any]:
    conditions = [] if ready_at is None else [{"type": "Ready", "status": "True", "lastTransitionTime": iso(ready_at)}]
    p: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": iso(created)},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conditions, "containerStatuses": [{"restartCount": restarts}]},
    }
    if cost is not None:
        p["metadata"]["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": str(cost)}
    return p


# -- units ------------------------------------------------------------------------------------


def test_deletion_order_follows_kubes_ranking() -> None:
    pods = [
        pod("ready-old", node="n1", phase="Running", ready_at=NOW - 5000, created=NOW - 6000),
        pod("ready-new", node="n2", phase="Running", ready_at=NOW - 10, created=NOW - 6000),
        pod("running-not-ready", node="n3", phase="Running"),
        pod("unknown", node="n4", phase="Unknown"),
        pod("pending-assigned", node="n5"),
        pod("unassigned", phase="Running", ready_at=NOW - 5000),
    ]
    order = [p["metadata"]["name"] for p in pods_to_delete(pods, pods, 6 - 1, NOW)]
    assert order == ["unassigned", "pending-assigned", "unknown", "running-not-ready", "ready-new"]


def test_deletion_order_cost_rank_restarts_and_age() -> None:
    a = pod("cheap", node="n1", phase="Running", ready_at=NOW - 5000, cost=-5)
    b = pod("doubled", node="n2", phase="Running", ready_at=NOW - 5000)
    c = pod("doubled-too", node="n2", phase="Running", ready_at=NOW - 5000, restarts=3)
    d = pod("alone", node="n3", phase="Running", ready_at=NOW - 5000)
    order = [p["metadata"]["name"] for p in pods_to_delete([d, c, b, a], [a, b, c, d], 3, NOW)]
    # lowest cost first, then pods sharing a node (more restarts first), the lone pod last
    assert order == ["cheap", "doubled-too", "doubled"]
    # among equals, the newer pod goes first
    young, old = pod("young", created=NOW - 10), pod("old", created=NOW - 100_000)
    assert pods_to_delete([old, young], [], 1, NOW)[0]["metadata"]["name"] == "young"


def test_selectors() -> None:
    sel = {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    assert selector_matches(sel, {"app": "web", "tier": "a"})
    assert not selector_matches(sel, {"app": "web", "tier": "c"})
    assert not selector_matches(sel, {"app": "web"})
    assert selector_matches({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}, {"a": "b"})
    assert not selector_matches({}, {"app": "web"})


def test_slow_start_batches_double_and_stop_at_a_failure() -> None:
    async def go() -> None:
        sizes: list[int] = []
        calls = 0

        async def ok() -> None:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0)

        async def batch_counter(count: int, fail_at: int | None) -> tuple[int, Exception | None]:
            nonlocal calls
            calls = 0

            async def fn() -> None:
                nonlocal calls
                calls += 1
                if fail_at is not None and calls == fail_at:
                    raise RuntimeError("refused")

            return await slow_start_batch(count, 1, fn)

        done, err = await slow_start_batch(10, 1, ok)
        assert (done, err, calls) == (10, None, 10)
        done, err = await batch_counter(10, fail_at=2)  # batches 1, 2 (one fails): 4 and 3 never run
        assert done == 2 and isinstance(err, RuntimeError) and calls == 3
        sizes.append(done)

    asyncio.run(go())


def test_expectations_wait_for_observations_or_time_out() -> None:
    t = [0.0]
    e = Expectations(lambda: t[0], timeout=300)
    assert e.satisfied("ns/rs")
    e.expect_creations("ns/rs", 2)
    assert not e.satisfied("ns/rs")
    e.creation_observed("ns/rs")
    assert not e.satisfied("ns/rs")
    e.creation_observed("ns/rs")
    assert e.satisfied("ns/rs")
    e.expect_deletions("ns/rs", ["ns/a", "ns/b"])
    e.deletion_observed("ns/rs", "ns/a")
    e.deletion_observed("ns/rs", "ns/a")  # a duplicate changes nothing
    assert not e.satisfied("ns/rs")
    t[0] = 301
    assert e.satisfied("ns/rs")  # an event was lost: act again after the timeout


class FakeClient:
    """Records writes; answers creates with a name (the informer never sees them)."""

    def __init__(self) -> None:
        self.creates: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.status_writes = 0

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        if path.endswith("/events"):
            self.events.append(body)  # what the controller tells (SuccessfulCreate)
        else:
            self.creates.append(body)
        return body

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return body  # an event's count bumped

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.status_writes += 1
        return body


def test_a_burst_of_events_does_not_create_twice() -> None:
    async def go() -> None:
        fake = FakeClient()
        client = cast(RestClient, fake)
        controller = ReplicaSetController(client, InformerFactory(client))
        rs = {
            "metadata": {"name": "web", "namespace": "ns", "uid": "rs-uid", "generation": 1, "resourceVersion": "5"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}},
            },
        }
        controller.replicasets.apply("ADDED", rs)
        for _ in range(20):  # twenty reconciles before the informer shows any of the new pods
            await controller.reconcile("ns/web")
        assert len(fake.creates) == 3
        assert controller.expectations.pending("ns/web") == (3, 0)
        made = fake.creates[0]
        assert made["metadata"]["generateName"] == "web-"
        assert made["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web",
                "uid": "rs-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        # the informer shows them: expectations are met, and nothing more is made
        for i, body in enumerate(fake.creates[:3]):
            seen = {
                **body,
                "metadata": {
                    **body["metadata"],
                    "name": f"web-{i}",
                    "namespace": "ns",
                    "uid": f"p{i}",
                    "resourceVersion": str(10 + i),
                },
            }
            controller.pods.apply("ADDED", seen)
        assert controller.expectations.satisfied("ns/web")
        await controller.reconcile("ns/web")
        assert len(fake.creates) == 3

    asyncio.run(go())


# -- against a real apiserver -----------------------------------------------------------------


def rs_body(name: str, replicas: int, app: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }


def rs_path(ns: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{ns}/replicasets" + (f"/{name}" if name else "")


def test_replicaset_creates_scales_and_reports(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "rs-basic"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, [ReplicaSetController]), kubelet(client, ns):
                rs = await client.create(rs_path(ns), rs_body("web", 3, "web"))

                async def status_is(replicas: int, ready: int) -> bool:
                    st = (await client.get(rs_path(ns, "web"))).get("status") or {}
                    return (st.get("replicas"), st.get("readyReplicas"), st.get("availableReplicas")) == (
                        replicas,
                        ready,
                        ready,
                    ) and st.get("observedGeneration") == (await client.get(rs_path(ns, "web")))["metadata"][
                        "generation"
                    ]

                await eventually(lambda: status_is(3, 3), what="3 ready replicas")
                pods = await pods_of(client, ns)
                assert len(pods) == 3
                for p in pods:
                    assert p["metadata"]["name"].startswith("web-") and len(p["metadata"]["name"]) == len("web-") + 5
                    ref = p["metadata"]["ownerReferences"][0]
                    assert (ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
                        rs["metadata"]["uid"],
                        True,
                        True,
                    )
                await client.patch(rs_path(ns, "web") + "/scale", {"spec": {"replicas": 5}})
                await eventually(lambda: status_is(5, 5), what="scaled up to 5")
                await client.patch(rs_path(ns, "web") + "/scale", {"spec": {"replicas": 1}})
                await eventually(lambda: status_is(1, 1), what="scaled down to 1")
                assert len(await pods_of(client, ns)) == 1

    asyncio.run(go())


def test_replicationcontroller_creates_adopts_scales_and_reports(cluster: ApiserverUnderTest) -> None:
    """The same controller over ReplicationControllers: a label-map selector (defaulted from the
    template's labels by the apiserver), owner references of kind ReplicationController."""

    async def go() -> None:
        ns = "rc-basic"
        rcs = f"/api/v1/namespaces/{ns}/replicationcontrollers"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            orphan = {
                "metadata": {"name": "orphan", "labels": {"app": "db", "tier": "x"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            }
            await client.create(f"/api/v1/namespaces/{ns}/pods", orphan)
            async with running(client, [ReplicationManager]), kubelet(client, ns):
                body = {
                    "metadata": {"name": "db"},
                    "spec": {
                        "replicas": 2,
                        "template": {
                            "metadata": {"labels": {"app": "db"}},
                            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                        },
                    },
                }
                rc = await client.create(rcs, body)
                assert rc["spec"]["selector"] == {"app": "db"}

                async def status_is(replicas: int) -> bool:
                    got = await client.get(f"{rcs}/db")
                    st = got.get("status") or {}
                    return (st.get("replicas"), st.get("readyReplicas")) == (replicas, replicas) and st.get(
                        "observedGeneration"
                    ) == got["metadata"]["generation"]

                await eventually(lambda: status_is(2), what="2 ready replicas")
                pods = await pods_of(client, ns)
                assert "orphan" in [p["metadata"]["name"] for p in pods] and len(pods) == 2
                for p in pods:
                    [ref] = p["metadata"]["ownerReferences"]
                    # apiVersion v1, the RC's own: the garbage collector finds the owner by it
                    want = ("v1", "ReplicationController", rc["metadata"]["uid"], True)
                    assert (ref["apiVersion"], ref["kind"], ref["uid"], ref["controller"]) == want
                await client.patch(f"{rcs}/db/scale", {"spec": {"replicas": 3}})
                await eventually(lambda: status_is(3), what="scaled up to 3")

    asyncio.run(go())


def test_scale_down_keeps_ready_pods(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "rs-order"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, [ReplicaSetController]):
                await client.create(rs_path(ns), rs_body("web", 3, "web"))

                async def count(n: int) -> bool:
                    return len(await pods_of(client, ns)) == n

                await eventually(lambda: count(3), what="3 pods")
                keep = (await pods_of(client, ns))[1]["metadata"]["name"]
                await client.patch(f"/api/v1/namespaces/{ns}/pods/{keep}/status", ready_status())
                await asyncio.sleep(0.2)
                await client.patch(rs_path(ns, "web"), {"spec": {"replicas": 1}})
                await eventually(lambda: count(1), what="scaled down to 1")
                [left] = await pods_of(client, ns)
                assert left["metadata"]["name"] == keep and is_ready(left)

    asyncio.run(go())


def test_adopts_orphans_and_releases_pods_that_stop_matching(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "rs-adopt"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            orphan = {
                "metadata": {"name": "orphan", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            }
            await client.create(f"/api/v1/namespaces/{ns}/pods", orphan)
            async with running(client, [ReplicaSetController]):
                rs = await client.create(rs_path(ns), rs_body("web", 2, "web"))
                uid = rs["metadata"]["uid"]

                async def owned() -> list[str]:
                    return sorted(
                        p["metadata"]["name"]
                        for p in await pods_of(client, ns)
                        if any(r["uid"] == uid for r in p["metadata"].get("ownerReferences") or ())
                    )

                async def two_owned_with_orphan() -> bool:
                    names = await owned()
                    return len(names) == 2 and "orphan" in names

                await eventually(two_owned_with_orphan, what="the orphan adopted, one pod made")
                await asyncio.sleep(0.3)
                assert len(await pods_of(client, ns)) == 2  # adopted, not duplicated
                # the orphan stops matching: released (no owner) and replaced
                await client.patch(f"/api/v1/namespaces/{ns}/pods/orphan", {"metadata": {"labels": {"app": "other"}}})

                async def released() -> bool:
                    names = await owned()
                    p = await client.get(f"/api/v1/namespaces/{ns}/pods/orphan")
                    return len(names) == 2 and "orphan" not in names and not p["metadata"].get("ownerReferences")

                await eventually(released, what="released and replaced")

    asyncio.run(go())


def test_a_burst_of_updates_against_the_apiserver_makes_exactly_the_replicas(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "rs-burst"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, [ReplicaSetController]) as (controller,):
                await client.create(rs_path(ns), rs_body("web", 20, "web"))
                for _ in range(50):
                    controller.queue.add(f"{ns}/web")
                    await asyncio.sleep(0.005)

                async def count(n: int) -> bool:
                    return len(await pods_of(client, ns)) == n

                await eventually(lambda: count(20), what="20 pods")
                for _ in range(30):
                    controller.queue.add(f"{ns}/web")
                await asyncio.sleep(1.0)
                assert len(await pods_of(client, ns)) == 20

    asyncio.run(go())


def test_a_quota_that_refuses_a_pod_is_a_replica_failure_and_events_tell_it(cluster: ApiserverUnderTest) -> None:
    """Conformance "should surface a failure condition on a common issue like exceeded quota":
    a ReplicationController wanting 3 pods under a quota of 2 gets ReplicaFailure (FailedCreate,
    the quota's words) and FailedCreate events; scaled to 2 the condition goes."""

    async def go() -> None:
        ns = "rc-quota"
        rcs = f"/api/v1/namespaces/{ns}/replicationcontrollers"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            quota = {"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "2"}}}
            await client.create(f"/api/v1/namespaces/{ns}/resourcequotas", quota)
            async with running(client, [ReplicationManager, ResourceQuotaController]):

                async def quota_counted() -> bool:
                    got = await client.get(f"/api/v1/namespaces/{ns}/resourcequotas/pods")
                    return (got.get("status") or {}).get("hard") == {"pods": "2"}

                await eventually(quota_counted, what="the quota's status")
                template = {"metadata": {"labels": {"app": "q"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
                await client.create(rcs, {"metadata": {"name": "q"}, "spec": {"replicas": 3, "template": template}})

                async def failure() -> Any:
                    conditions = ((await client.get(f"{rcs}/q")).get("status") or {}).get("conditions") or []
                    return next((c for c in conditions if c["type"] == "ReplicaFailure"), None)

                cond = await eventually(failure, what="ReplicaFailure")
                assert cond["status"] == "True" and cond["reason"] == "FailedCreate"
                assert "exceeded quota" in cond["message"]

                async def reasons() -> set[str]:
                    got = await client.get(f"/api/v1/namespaces/{ns}/events")
                    return {e["reason"] for e in got.get("items") or [] if e["involvedObject"]["name"] == "q"}

                await eventually(reasons, what="the events")
                assert {"SuccessfulCreate", "FailedCreate"} <= await reasons()
                await client.patch(f"{rcs}/q", {"spec": {"replicas": 2}})
                await eventually(lambda: _no(failure), what="ReplicaFailure removed")

    asyncio.run(go())


async def _no(check: Any) -> bool:
    return await check() is None
