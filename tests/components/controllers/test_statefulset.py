"""The statefulset controller against a real apiserver: pods made one ordinal at a time and only
once the previous one is ready, stable identity and claims, a rolling update in reverse
ordinal order that ends with the update revision current, a partition that holds the lower
ordinals, ordered scale-down, and Parallel management."""

from __future__ import annotations

import asyncio
from typing import Any

from components.client.rest import RestClient
from components.controllers import _stateful_pods as sp
from components.controllers.runner import running
from components.controllers.statefulset import StatefulSetController
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_replicaset_support import api, kubelet, make_namespace, pods_of
from tests.support.wait import eventually


def sts_body(name: str, replicas: int, image: str = "busybox:1.36", **extra: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": image}]}},
            **extra,
        },
    }


def path(ns: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{ns}/statefulsets" + (f"/{name}" if name else "")


async def live(client: RestClient, ns: str, app: str) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in await pods_of(client, ns, f"app={app}")
        if not p["metadata"].get("deletionTimestamp")
    }


def test_ordinal_identity_and_claims() -> None:
    sts = sts_body(
        "db", 2, volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]
    )
    sts["metadata"].update(uid="u1", namespace="ns")
    pod = sp.new_pod(sts, sts["spec"]["template"], "db-abc", 1)
    assert pod["metadata"]["name"] == "db-1"
    assert pod["spec"]["hostname"] == "db-1" and pod["spec"]["subdomain"] == "db"
    assert pod["metadata"]["labels"] == {
        "app": "db",
        sp.POD_NAME_LABEL: "db-1",
        sp.POD_INDEX_LABEL: "1",
        "controller-revision-hash": "db-abc",
    }
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}]
    claims = sp.claims_for(sts, "db-1")
    assert [c["metadata"]["name"] for c in claims] == ["data-db-1"] and claims[0]["metadata"]["labels"] == {"app": "db"}
    assert sp.ordinal_of("db", pod) == 1 and sp.ordinal_of("d", pod) is None


def test_a_statefulset_is_made_updated_and_scaled_in_order(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "sts"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, [StatefulSetController]), kubelet(client, ns) as fake:
                fake.paused = True
                claim = {
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
                await client.create(path(ns), sts_body("web", 3, volumeClaimTemplates=[claim]))
                await eventually(lambda: live(client, ns, "web"), what="web-0 made")
                await asyncio.sleep(1.0)
                assert set(await live(client, ns, "web")) == {"web-0"}  # web-1 waits for web-0 to be ready
                fake.paused = False

                async def names(expected: set[str]) -> bool:
                    return set(await live(client, ns, "web")) == expected

                await eventually(lambda: names({"web-0", "web-1", "web-2"}), what="three members")
                claims = await client.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims")
                assert sorted(c["metadata"]["name"] for c in claims["items"]) == [
                    "data-web-0",
                    "data-web-1",
                    "data-web-2",
                ]

                async def settled() -> dict[str, Any] | None:
                    sts = await client.get(path(ns, "web"))
                    st = sts.get("status") or {}
                    ok = (
                        st.get("readyReplicas") == 3
                        and st.get("updatedReplicas") == 3
                        and st.get("currentRevision") == st.get("updateRevision")
                        and st.get("observedGeneration") == sts["metadata"]["generation"]
                    )
                    return st if ok else None

                first = await eventually(settled, what="3 ready on one revision")

                # a rolling update replaces every pod, highest ordinal first
                await client.patch(
                    path(ns, "web"),
                    {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}},
                    patch_type="strategic",
                )
                second = await eventually(
                    lambda: settled_on(client, ns, first["updateRevision"]), what="rolled to a new revision"
                )
                pods = await live(client, ns, "web")
                assert {p["spec"]["containers"][0]["image"] for p in pods.values()} == {"busybox:1.37"}
                assert all(p["metadata"]["labels"]["controller-revision-hash"] == second for p in pods.values())

                # a partition keeps the ordinals below it on the current revision
                await client.patch(
                    path(ns, "web"),
                    {
                        "spec": {
                            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
                            "template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.38"}]}},
                        }
                    },
                    patch_type="strategic",
                )

                async def partitioned() -> bool:
                    pods = await live(client, ns, "web")
                    images = {n: p["spec"]["containers"][0]["image"] for n, p in pods.items()}
                    return images == {
                        "web-0": "busybox:1.37",
                        "web-1": "busybox:1.37",
                        "web-2": "busybox:1.38",
                    } and all((p.get("status") or {}).get("phase") == "Running" for p in pods.values())

                await eventually(partitioned, what="only web-2 updated")

                # ordered scale-down: the highest ordinals go
                await client.patch(path(ns, "web") + "/scale", {"spec": {"replicas": 1}})
                await eventually(lambda: names({"web-0"}), what="scaled down to web-0")

    asyncio.run(go())


async def settled_on(client: RestClient, ns: str, previous: str) -> str | None:
    sts = await client.get(path(ns, "web"))
    st = sts.get("status") or {}
    if st.get("updateRevision") == previous or st.get("currentRevision") != st.get("updateRevision"):
        return None
    if st.get("updatedReplicas") != 3 or st.get("readyReplicas") != 3:
        return None
    return str(st["updateRevision"])


def test_parallel_management_makes_every_member_at_once(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "sts-parallel"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, [StatefulSetController]), kubelet(client, ns) as fake:
                fake.paused = True  # nobody becomes ready: Parallel does not wait
                await client.create(path(ns), sts_body("burst", 3, podManagementPolicy="Parallel"))

                async def all_three() -> bool:
                    return set(await live(client, ns, "burst")) == {"burst-0", "burst-1", "burst-2"}

                await eventually(all_three, what="three members without waiting")

    asyncio.run(go())


def test_claims_go_with_the_set_or_the_condemned_pod_when_the_policy_says_delete(cluster: ApiserverUnderTest) -> None:
    from components.controllers.garbagecollector import GarbageCollector

    async def go() -> None:
        ns = "sts-retention"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, [StatefulSetController, GarbageCollector]), kubelet(client, ns):
                claim = {
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
                policy = {"whenDeleted": "Delete", "whenScaled": "Delete"}
                body = sts_body("keep", 2, volumeClaimTemplates=[claim], persistentVolumeClaimRetentionPolicy=policy)
                await client.create(path(ns), body)

                async def claims() -> list[str]:
                    found = await client.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims")
                    return sorted(
                        c["metadata"]["name"] for c in found["items"] if not c["metadata"].get("deletionTimestamp")
                    )

                async def claims_are(names: list[str]) -> bool:
                    return await claims() == names

                await eventually(lambda: claims_are(["data-keep-0", "data-keep-1"]), what="two claims")
                await client.patch(path(ns, "keep") + "/scale", {"spec": {"replicas": 1}})
                await eventually(lambda: claims_are(["data-keep-0"]), what="the scaled-away claim gone")
                await client.delete(path(ns, "keep"))
                await eventually(lambda: claims_are([]), what="the set's claims gone with it")

    asyncio.run(go())
