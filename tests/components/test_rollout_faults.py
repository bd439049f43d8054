"""A Deployment rollout through faults, with `raftkube controller-manager` as real processes and
a stand-in kubelet marking pods Ready: the active controller-manager killed mid-rollout (the
standby takes over and creates nothing twice), then the store's leader killed mid-rollout (the
rollout completes and no pod or replicaset the cluster acknowledged is lost).

"Nothing twice" is checked from a watch over the whole rollout: the new ReplicaSet's pods are
never deleted during a rollout, so a controller that created one twice (expectations lost in
the takeover, a stale cache) shows as more ADDED pods of that ReplicaSet than its replicas."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from typing import Any

from components.client.rest import ApiError, RestClient, TransportError
from machinery.process.launch import free_ports
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_controller_manager import start
from tests.components.controllers.test_deployment import deploy_body, done, dpath, replicasets, set_image
from tests.components.controllers.test_replicaset_support import api, kubelet, make_namespace
from tests.support.cli import raftkube
from tests.support.wait import eventually

REPLICAS = 6


def start_controller_manager(cluster: ApiserverUnderTest) -> subprocess.Popen[bytes]:
    """With the 3 s lease of `test_controller_manager.start`, on a free health port."""
    return start(cluster, free_ports(1)[0])


class Ledger:
    """Every pod ADDED and DELETED in a namespace, from one watch that resumes across dropped
    streams (a store leader's death may end it) from the last resourceVersion seen."""

    def __init__(self, client: RestClient, ns: str) -> None:
        self.client, self.ns = client, ns
        self.before: set[str] = set()  # the pods listed before the watch began
        self.added: dict[str, dict[str, Any]] = {}
        self.deleted: set[str] = set()

    async def run(self, rv: str) -> None:
        path = f"/api/v1/namespaces/{self.ns}/pods"
        for _ in range(100):  # bounded: each round is one watch stream
            with contextlib.suppress(TransportError, ApiError):
                async for ev in self.client.watch(path, {"resourceVersion": rv, "allowWatchBookmarks": "true"}):
                    rv = ev.object.get("metadata", {}).get("resourceVersion") or rv
                    name = ev.object.get("metadata", {}).get("name", "")
                    if ev.type == "ADDED":
                        self.added[name] = ev.object
                    elif ev.type == "DELETED":
                        self.deleted.add(name)
            await asyncio.sleep(0.2)

    def added_by(self, rs_name: str) -> list[str]:
        return [
            name
            for name, pod in self.added.items()
            if any(o.get("name") == rs_name for o in pod["metadata"].get("ownerReferences") or ())
        ]


@contextlib.asynccontextmanager
async def ledger(client: RestClient, ns: str) -> AsyncIterator[Ledger]:
    listed = await client.get(f"/api/v1/namespaces/{ns}/pods")
    book = Ledger(client, ns)
    book.before = {p["metadata"]["name"] for p in listed.get("items") or ()}
    rv = listed["metadata"]["resourceVersion"]
    task = asyncio.create_task(book.run(rv))
    try:
        yield book
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def new_rs_ready(client: RestClient, ns: str, image: str, at_least: int) -> bool:
    for rs in await replicasets(client, ns):
        if rs["spec"]["template"]["spec"]["containers"][0]["image"] == image:
            return int((rs.get("status") or {}).get("readyReplicas") or 0) >= at_least
    return False


async def rs_named_for(client: RestClient, ns: str, image: str) -> list[str]:
    return [
        rs["metadata"]["name"]
        for rs in await replicasets(client, ns)
        if rs["spec"]["template"]["spec"]["containers"][0]["image"] == image
    ]


async def roll(client: RestClient, ns: str, image: str, fault: Any) -> Ledger:
    """Rolls `web` to `image` one pod at a time, calls `fault()` once two new pods are ready,
    waits for the rollout to finish; returns the pods seen meanwhile."""
    async with ledger(client, ns) as book:
        await set_image(client, ns, "web", image)
        await eventually(lambda: new_rs_ready(client, ns, image, 2), timeout=60, what="the rollout under way")
        await asyncio.to_thread(fault)
        await eventually(lambda: done(client, ns, "web", image), timeout=90, what="the rollout done after the fault")
        await asyncio.sleep(1.0)  # a late duplicate would show in this second
        return book


def test_standby_controller_manager_finishes_a_rollout_creating_nothing_twice(
    cluster: ApiserverUnderTest, processes: list[subprocess.Popen[bytes]]
) -> None:
    async def go() -> None:
        ns = "faults-cm"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            processes.append(start_controller_manager(cluster))
            lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"

            async def first_leads() -> bool:
                with contextlib.suppress(Exception):
                    return bool((await client.get(lease_path))["spec"].get("holderIdentity"))
                return False

            await eventually(first_leads, what="the first controller-manager leads")
            processes.append(start_controller_manager(cluster))
            async with kubelet(client, ns, delay=0.5):
                strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
                await client.create(dpath(ns), deploy_body("web", REPLICAS, "nginx:1", **strategy))
                await eventually(lambda: done(client, ns, "web"), timeout=60, what="the first revision")
                holder = (await client.get(lease_path))["spec"]["holderIdentity"]

                def crash_the_leader() -> None:
                    os.killpg(processes[0].pid, signal.SIGKILL)  # no release: the standby waits out the lease
                    processes[0].communicate(timeout=10)

                book = await roll(client, ns, "nginx:2", crash_the_leader)
                assert (await client.get(lease_path))["spec"]["holderIdentity"] != holder
                [new_rs] = await rs_named_for(client, ns, "nginx:2")
                assert len(book.added_by(new_rs)) == REPLICAS, sorted(book.added_by(new_rs))
                assert len(await replicasets(client, ns)) == 2

    asyncio.run(go())


def test_a_rollout_finishes_when_the_store_leader_dies_and_nothing_is_lost(
    cluster: ApiserverUnderTest, processes: list[subprocess.Popen[bytes]]
) -> None:
    async def go() -> None:
        ns = "faults-store"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            processes.append(start_controller_manager(cluster))
            async with kubelet(client, ns, delay=0.5):
                strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
                await client.create(dpath(ns), deploy_body("web", REPLICAS, "nginx:1", **strategy))
                await eventually(lambda: done(client, ns, "web"), timeout=60, what="the first revision")

                def kill_the_store_leader() -> None:
                    proc = raftkube("store", "kill", "leader", "--data-dir", str(cluster.data_dir))
                    assert proc.returncode == 0, proc.stderr

                book = await roll(client, ns, "nginx:2", kill_the_store_leader)
                # every pod the cluster said it created and never said it deleted is still there
                kept = {p["metadata"]["name"] for p in (await client.get(f"/api/v1/namespaces/{ns}/pods"))["items"]}
                assert kept == (book.before | set(book.added)) - book.deleted
                [new_rs] = await rs_named_for(client, ns, "nginx:2")
                assert len(book.added_by(new_rs)) == REPLICAS
                revisions = sorted(
                    rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                    for rs in await replicasets(client, ns)
                )
                assert revisions == ["1", "2"]

    asyncio.run(go())
