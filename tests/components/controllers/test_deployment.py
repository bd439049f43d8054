"""The deployment controller against a real apiserver, with the replicaset controller and a
stand-in kubelet (pods marked Running+Ready, left unscheduled): rollouts, scaling, the
maxSurge/maxUnavailable bounds at every observed pod event, kubectl's rollout status, undo,
restart, pause, Recreate and the revision history."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from components.client.rest import RestClient
from components.controllers.deployment import DeploymentController
from components.controllers.replicaset import ReplicaSetController
from components.controllers.runner import running
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_replicaset_support import (
    api,
    is_ready,
    kubelet,
    make_namespace,
    pods_of,
)
from tests.support.wait import eventually

CONTROLLERS = [ReplicaSetController, DeploymentController]


def deploy_body(name: str, replicas: int, image: str = "nginx:1", **strategy: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": image}]}},
    }
    if strategy:
        spec["strategy"] = strategy
    return {"metadata": {"name": name}, "spec": spec}


def dpath(ns: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{ns}/deployments" + (f"/{name}" if name else "")


async def replicasets(client: RestClient, ns: str) -> list[dict[str, Any]]:
    return list((await client.get(f"/apis/apps/v1/namespaces/{ns}/replicasets")).get("items") or [])


async def done(client: RestClient, ns: str, name: str, image: str | None = None) -> bool:
    """kubectl's rollout-status test, plus every pod running the image."""
    d = await client.get(dpath(ns, name))
    st, want = d.get("status") or {}, d["spec"]["replicas"]
    if st.get("observedGeneration", 0) < d["metadata"]["generation"]:
        return False
    if (st.get("updatedReplicas"), st.get("replicas"), st.get("availableReplicas")) != (want, want, want):
        return False
    pods = await pods_of(client, ns, f"app={name}")
    if len(pods) != want or not all(is_ready(p) for p in pods):
        return False
    return image is None or all(p["spec"]["containers"][0]["image"] == image for p in pods)


async def set_image(client: RestClient, ns: str, name: str, image: str) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}
    await client.patch(dpath(ns, name), patch, "strategic")


def test_a_deployment_becomes_pods_and_scales(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "deploy-basic"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, CONTROLLERS), kubelet(client, ns):
                d = await client.create(dpath(ns), deploy_body("web", 3))
                await eventually(lambda: done(client, ns, "web"), what="3 pods")
                [rs] = await replicasets(client, ns)
                hash_ = rs["metadata"]["labels"]["pod-template-hash"]
                assert rs["metadata"]["name"] == f"web-{hash_}"
                assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": hash_}
                assert rs["metadata"]["ownerReferences"][0]["uid"] == d["metadata"]["uid"]
                assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
                d = await client.get(dpath(ns, "web"))
                assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
                conds = {c["type"]: c for c in d["status"]["conditions"]}
                assert conds["Available"]["reason"] == "MinimumReplicasAvailable"
                assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"
                out = await asyncio.to_thread(
                    cluster.ok, "rollout", "status", "deployment/web", "-n", ns, "--timeout=30s"
                )
                assert "successfully rolled out" in out
                await client.patch(dpath(ns, "web") + "/scale", {"spec": {"replicas": 5}})
                await eventually(lambda: done(client, ns, "web"), what="scaled to 5")
                await client.patch(dpath(ns, "web"), {"spec": {"replicas": 2}})
                await eventually(lambda: done(client, ns, "web"), what="scaled to 2")
                assert len(await replicasets(client, ns)) == 1

    asyncio.run(go())


class Bounds:
    """Watches the namespace's pods; on every event checks total <= replicas + surge and
    available (ready, not deleted) >= replicas - unavailable."""

    def __init__(self, client: RestClient, ns: str, most: int, least: int) -> None:
        self.client, self.ns, self.most, self.least = client, ns, most, least
        self.pods: dict[str, dict[str, Any]] = {}
        self.events = 0
        self.violations: list[str] = []
        self.peak = 0

    async def run(self, rv: str) -> None:
        params = {"resourceVersion": rv, "timeoutSeconds": 60}
        async for ev in self.client.watch(f"/api/v1/namespaces/{self.ns}/pods", params):
            if ev.type == "BOOKMARK":
                continue
            name = ev.object["metadata"]["name"]
            if ev.type == "DELETED":
                self.pods.pop(name, None)
            else:
                self.pods[name] = ev.object
            self.events += 1
            total = len(self.pods)
            ready = sum(1 for p in self.pods.values() if is_ready(p))
            self.peak = max(self.peak, total)
            if total > self.most or ready < self.least:
                self.violations.append(f"{ev.type} {name}: {total} pods, {ready} available")


def test_rolling_update_keeps_surge_and_availability_bounds(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "deploy-rolling"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}
            async with running(client, CONTROLLERS), kubelet(client, ns, delay=0.2):
                await client.create(dpath(ns), deploy_body("web", 4, **strategy))
                await eventually(lambda: done(client, ns, "web"), what="4 pods")
                listed = await client.get(f"/api/v1/namespaces/{ns}/pods")
                bounds = Bounds(client, ns, most=4 + 1, least=4 - 1)  # 25% of 4 rounds down to 1
                for p in listed["items"]:
                    bounds.pods[p["metadata"]["name"]] = p
                watcher = asyncio.create_task(bounds.run(listed["metadata"]["resourceVersion"]))
                try:
                    await set_image(client, ns, "web", "nginx:2")
                    await eventually(lambda: done(client, ns, "web", "nginx:2"), what="rolled out to nginx:2")
                    await asyncio.sleep(0.3)
                finally:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                assert not bounds.violations, bounds.violations
                assert bounds.peak == 5 and bounds.events >= 8  # it did surge, and we saw the rollout
                out = await asyncio.to_thread(
                    cluster.ok, "rollout", "status", "deployment/web", "-n", ns, "--timeout=30s"
                )
                assert "successfully rolled out" in out
                rss = {
                    rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: rs
                    for rs in await replicasets(client, ns)
                }
                assert (
                    sorted(rss) == ["1", "2"]
                    and rss["1"]["spec"]["replicas"] == 0
                    and rss["2"]["spec"]["replicas"] == 4
                )

    asyncio.run(go())


def test_rollout_undo_restart_and_pause(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "deploy-undo"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, CONTROLLERS), kubelet(client, ns):
                await client.create(dpath(ns), deploy_body("web", 2, "nginx:1"))
                await eventually(lambda: done(client, ns, "web", "nginx:1"), what="nginx:1")
                await set_image(client, ns, "web", "nginx:2")
                await eventually(lambda: done(client, ns, "web", "nginx:2"), what="nginx:2")
                await asyncio.to_thread(cluster.ok, "rollout", "undo", "deployment/web", "-n", ns)
                await eventually(lambda: done(client, ns, "web", "nginx:1"), what="undone to nginx:1")
                d = await client.get(dpath(ns, "web"))
                assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
                assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
                assert len(await replicasets(client, ns)) == 2  # revision 1's replicaset came back as 3

                await asyncio.to_thread(cluster.ok, "rollout", "restart", "deployment/web", "-n", ns)

                async def three_sets() -> bool:
                    return len(await replicasets(client, ns)) == 3 and await done(client, ns, "web")

                await eventually(three_sets, what="restart made a new replicaset")
                await asyncio.to_thread(cluster.ok, "rollout", "status", "deployment/web", "-n", ns, "--timeout=30s")

                await client.patch(dpath(ns, "web"), {"spec": {"paused": True}})
                await set_image(client, ns, "web", "nginx:3")
                await asyncio.sleep(1.0)
                assert len(await replicasets(client, ns)) == 3  # paused: no rollout
                d = await client.get(dpath(ns, "web"))
                assert {c["type"]: c["reason"] for c in d["status"]["conditions"]}["Progressing"] == "DeploymentPaused"
                await client.patch(dpath(ns, "web"), {"spec": {"paused": False}})
                await eventually(lambda: done(client, ns, "web", "nginx:3"), what="resumed to nginx:3")

    asyncio.run(go())


def test_recreate_and_revision_history(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "deploy-recreate"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, CONTROLLERS), kubelet(client, ns):
                body = deploy_body("web", 3, "nginx:1", type="Recreate")
                body["spec"]["revisionHistoryLimit"] = 1
                await client.create(dpath(ns), body)
                await eventually(lambda: done(client, ns, "web", "nginx:1"), what="nginx:1")
                listed = await client.get(f"/api/v1/namespaces/{ns}/pods")
                mixed: list[str] = []

                async def watch() -> None:
                    pods = {p["metadata"]["name"]: p for p in listed["items"]}
                    params = {"resourceVersion": listed["metadata"]["resourceVersion"], "timeoutSeconds": 60}
                    async for ev in client.watch(f"/api/v1/namespaces/{ns}/pods", params):
                        if ev.type == "BOOKMARK":
                            continue
                        name = ev.object["metadata"]["name"]
                        if ev.type == "DELETED":
                            pods.pop(name, None)
                        else:
                            pods[name] = ev.object
                        images = {p["spec"]["containers"][0]["image"] for p in pods.values()}
                        if len(images) > 1:
                            mixed.append(f"{ev.type} {name}: {sorted(images)}")

                watcher = asyncio.create_task(watch())
                try:
                    for image in ("nginx:2", "nginx:3"):
                        await set_image(client, ns, "web", image)
                        await eventually(lambda image=image: done(client, ns, "web", image), what=image)  # type: ignore[misc]
                finally:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                assert not mixed, mixed  # Recreate: never old and new pods together

                async def history_kept() -> bool:
                    revs = sorted(
                        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                        for rs in await replicasets(client, ns)
                    )
                    return revs == ["2", "3"]

                await eventually(history_kept, what="one old replicaset kept")

    asyncio.run(go())


def test_progress_deadline_exceeded_without_ready_pods(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "deploy-deadline"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, CONTROLLERS):  # no kubelet: pods never become ready
                body = deploy_body("web", 2)
                body["spec"]["progressDeadlineSeconds"] = 2
                await client.create(dpath(ns), body)

                async def timed_out() -> bool:
                    st = (await client.get(dpath(ns, "web"))).get("status") or {}
                    conds = {c["type"]: c for c in st.get("conditions") or ()}
                    progressing = conds.get("Progressing") or {}
                    return progressing.get("reason") == "ProgressDeadlineExceeded" and progressing["status"] == "False"

                await eventually(timed_out, timeout=15, what="ProgressDeadlineExceeded")
                d = await client.get(dpath(ns, "web"))
                assert {c["type"]: c["reason"] for c in d["status"]["conditions"]}[
                    "Available"
                ] == "MinimumReplicasUnavailable"
                proc = await asyncio.to_thread(
                    cluster.kubectl, "rollout", "status", "deployment/web", "-n", ns, "--timeout=20s"
                )
                assert proc.returncode != 0 and "exceeded its progress deadline" in proc.stderr

    asyncio.run(go())
